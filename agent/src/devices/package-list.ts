import { invalidArgument } from "@farm/shared/errors";

/** What `pm list packages` lines may name: an Android package (anything else in its output is skipped). */
const PACKAGE_NAME = /^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+$/;

/** The third-party packages: a read, run as is (no user input in it). */
export const LIST_THIRD_PARTY = "pm list packages -3";

/** Package names from `pm list packages` output ("package:NAME" lines), sorted and once each. */
export function parsePackageList(stdout: string): string[] {
  const names = new Set<string>();
  for (const line of stdout.split("\n")) {
    const m = /^package:(\S+)$/.exec(line.trim());
    if (m && PACKAGE_NAME.test(m[1] as string)) names.add(m[1] as string);
  }
  return [...names].sort();
}

/** Packages per page when the request says 0, and the most one page holds. */
export const PACKAGES_PAGE_DEFAULT = 200;
export const PACKAGES_PAGE_MAX = 1000;

/**
 * One page of sorted package names: those after the token's name (the last
 * of the page before), so an app installed between two reads neither repeats
 * a name nor hides one. The token is that name, base64url (opaque to callers).
 */
export function packagePage(sorted: readonly string[], pageSize: number, pageToken: string): { packages: string[]; nextPageToken: string } {
  const size = pageSize === 0 ? PACKAGES_PAGE_DEFAULT : Math.min(pageSize, PACKAGES_PAGE_MAX);
  let after = "";
  if (pageToken !== "") {
    after = Buffer.from(pageToken, "base64url").toString("utf8");
    if (!PACKAGE_NAME.test(after) || Buffer.from(after, "utf8").toString("base64url") !== pageToken) throw invalidArgument("page_token", "not a page token of ListPackages");
  }
  const rest = after === "" ? sorted : sorted.filter((name) => name > after);
  const packages = rest.slice(0, size);
  const last = packages[packages.length - 1];
  return { packages, nextPageToken: rest.length > size && last !== undefined ? Buffer.from(last, "utf8").toString("base64url") : "" };
}
