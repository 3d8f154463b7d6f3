import { Errors } from "@farm/shared/errors";
import { FarmError } from "./farm-error.js";

/** The largest page the coordinator serves; asking for it keeps round trips few. */
const PAGE_SIZE = 1000;

/** One page of a List* call: its rows and the token for the next (empty on the last). */
export interface PageOf<T> {
  items: T[];
  nextPageToken: string;
}

/**
 * Reads a List* call to its end by following next_page_token, so a listing
 * is never cut at the server's page size; with `limit`, stops once that
 * many rows are read (and asks for no more than it needs).
 */
export async function allPages<T>(fetch: (page: { pageSize: number; pageToken: string }) => Promise<PageOf<T>>, opts: { limit?: number } = {}): Promise<T[]> {
  const limit = opts.limit ?? Infinity;
  const out: T[] = [];
  let pageToken = "";
  const seen = new Set<string>();
  while (out.length < limit) {
    const page = await fetch({ pageSize: Math.min(PAGE_SIZE, limit - out.length), pageToken });
    out.push(...page.items);
    if (!page.nextPageToken) break;
    // A server handing back a token twice would keep this loop going forever.
    if (seen.has(page.nextPageToken)) throw new FarmError(Errors.INTERNAL, "the coordinator sent the same page token twice; the listing is incomplete", undefined, null);
    seen.add(page.nextPageToken);
    pageToken = page.nextPageToken;
  }
  return out.length > limit ? out.slice(0, limit) : out;
}
