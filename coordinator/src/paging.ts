import { createHash } from "node:crypto";
import { canonicalJson } from "@farm/shared/canonical-json";
import { invalidArgument } from "@farm/shared/errors";

/**
 * Keyset paging for List* calls (AIP-158): a page is the rows strictly after
 * the last row of the page before, in a unique and stable order, so rows
 * written between two reads neither repeat nor push others out of the list
 * (which OFFSET would do), and every page costs the same.
 */

/** Rows per page when the request says 0. */
export const DEFAULT_PAGE_SIZE = 100;
/** Larger requests are clamped to it. */
export const MAX_PAGE_SIZE = 1000;
/** Real tokens are well under 200 characters; anything longer is not one of ours. */
const MAX_TOKEN_CHARS = 512;
const TOKEN_VERSION = 1;

/** The paging fields of a List* request. */
export interface PageRequest {
  pageSize: number;
  pageToken: string;
}

export interface Page<T> {
  items: T[];
  /** Empty on the last page. */
  nextPageToken: string;
}

/** One column of a keyset key: text or an integer. */
export type KeyPart = string | number;
/** The type of each key column, checked when a token is read back. */
export type KeyShape = readonly ("string" | "number")[];
/** The key a shape describes, e.g. ["number", "string"] → [number, string]. */
export type KeyOf<S extends KeyShape> = { readonly [I in keyof S]: S[I] extends "number" ? number : string };

/**
 * What a token is issued for: the list, and the filters of the request.
 * Values "" and undefined mean "no filter" and are left out, so a request
 * that omits a filter and one that sends it empty share their tokens.
 */
export interface PageScope {
  list: string;
  filter?: Record<string, string | number | undefined>;
}

/** The page size a request asks for: 0 is the default, larger than the maximum is the maximum. */
export function pageSizeOf(requested: number): number {
  if (!Number.isSafeInteger(requested) || requested < 0) throw invalidArgument("page_size", `page_size must be 0 (the default, ${DEFAULT_PAGE_SIZE}) or more, got ${requested}`);
  return Math.min(requested || DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
}

/** An opaque token for the page after `key`: base64url of {v, f: the scope's fingerprint, k: key}. */
export function encodePageToken(scope: PageScope, key: readonly KeyPart[]): string {
  return Buffer.from(JSON.stringify({ v: TOKEN_VERSION, f: fingerprint(scope), k: key })).toString("base64url");
}

/**
 * The key a token carries, or undefined for "" (the first page). A token
 * that is not ours, or was issued for another list or other filters, is
 * INVALID_ARGUMENT on page_token: reading on would silently mix two lists.
 */
export function decodePageToken<S extends KeyShape>(token: string, scope: PageScope, shape: S): KeyOf<S> | undefined {
  if (token === "") return undefined;
  const malformed = () => invalidArgument("page_token", "page_token is not a token this list issued; start again without one");
  if (token.length > MAX_TOKEN_CHARS || !/^[A-Za-z0-9_-]+$/.test(token)) throw malformed();
  let body: unknown;
  try {
    body = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
  } catch {
    throw malformed();
  }
  if (typeof body !== "object" || body === null) throw malformed();
  const { v, f, k } = body as { v?: unknown; f?: unknown; k?: unknown };
  if (v !== TOKEN_VERSION || typeof f !== "string" || !Array.isArray(k)) throw malformed();
  if (f !== fingerprint(scope)) throw invalidArgument("page_token", "page_token was issued for other filters; send the same filters as the first page, or start again without a token");
  const fits = k.length === shape.length && k.every((part: unknown, i) => (shape[i] === "number" ? Number.isSafeInteger(part) : typeof part === "string"));
  if (!fits) throw malformed();
  // Checked part by part against the shape just above.
  return k as unknown as KeyOf<S>;
}

/**
 * Reads one page: `read` returns up to `limit` rows strictly after `after`
 * (all from the start when undefined) in key order. One row more than the
 * page is read, so the last page says so with an empty token instead of
 * sending the caller to an empty page.
 */
export function readPage<T, S extends KeyShape>(
  request: PageRequest,
  scope: PageScope,
  shape: S,
  keyOf: (row: T) => KeyOf<S>,
  read: (after: KeyOf<S> | undefined, limit: number) => T[],
): Page<T> {
  const size = pageSizeOf(request.pageSize);
  const after = decodePageToken(request.pageToken, scope, shape);
  const rows = read(after, size + 1);
  if (rows.length <= size) return { items: rows, nextPageToken: "" };
  const items = rows.slice(0, size);
  return { items, nextPageToken: encodePageToken(scope, keyOf(items[size - 1] as T)) };
}

/** A short hash of the list and its non-empty filters: binds a token without spelling the filters out. */
function fingerprint(scope: PageScope): string {
  const filter = Object.fromEntries(Object.entries(scope.filter ?? {}).filter(([, v]) => v !== undefined && v !== ""));
  return createHash("sha256").update(`${scope.list}\n${canonicalJson(filter)}`).digest("base64url").slice(0, 16);
}

/**
 * For lists kept in memory in key order: the index of the first element for
 * which `before` is false, by binary search (`before` is true for every
 * element up to some index, and false from there on). A page then costs
 * O(log n + page) instead of a sort or a scan.
 */
export function partitionPoint<T>(sorted: readonly T[], before: (item: T) => boolean): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (before(sorted[mid] as T)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
