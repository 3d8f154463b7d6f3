// What the Apps tab asks the phone (as routed, journaled RunShell calls),
// and how it reads the answers. A package name comes from the phone: it is
// checked before it goes into any command.

const PACKAGE_NAME = /^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+$/;

/** The third-party packages, as `pm list packages -3` prints them. */
export const LIST_PACKAGES = "pm list packages -3";

/** Package names from `pm list packages` output ("package:NAME" lines), sorted; anything else is skipped. */
export function parsePackages(stdout: string): string[] {
  const names = new Set<string>();
  for (const line of stdout.split("\n")) {
    const m = /^package:(\S+)\s*$/.exec(line.trim());
    if (m && PACKAGE_NAME.test(m[1] as string)) names.add(m[1] as string);
  }
  return [...names].sort();
}

export type AppAction = "launch" | "stop" | "uninstall";

/** The shell command of an action on a package; an unsafe name is refused, never quoted into a command. */
export function appCommand(action: AppAction, packageName: string): string {
  if (!PACKAGE_NAME.test(packageName)) throw new Error(`not a package name: ${JSON.stringify(packageName)}`);
  switch (action) {
    case "launch":
      // Its launcher activity, whatever it is called.
      return `monkey -p ${packageName} -c android.intent.category.LAUNCHER 1`;
    case "stop":
      return `am force-stop ${packageName}`;
    case "uninstall":
      return `pm uninstall ${packageName}`;
  }
}
