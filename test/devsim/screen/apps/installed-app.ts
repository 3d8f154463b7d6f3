import type { PackageManifest } from "../../device/package-manager.js";
import type { AppModel } from "../screen-spec.js";

/**
 * An app installed from a devsim APK that declares a launcher activity
 * (`mainActivity`): one screen with its name, so a test can see on the
 * phone's screen that it launched.
 */
export function installedAppModel(manifest: PackageManifest & { mainActivity: string }): AppModel {
  const label = manifest.label ?? manifest.name;
  return {
    packageName: manifest.name,
    label,
    mainActivity: manifest.mainActivity,
    activities: {},
    screen: (name) => (name === "main" ? { title: label, color: "#6a1b9a", items: [{ kind: "text", id: "greeting", text: `Hello from ${label}` }] } : undefined),
  };
}
