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
