// What the Apps tab asks the phone to do to an app (routed, journaled
// RunShell calls). A package name comes from the phone: it is checked
// before it goes into any command.

const PACKAGE_NAME = /^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+$/;

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
