import type { AppModel } from "../screen-spec.js";

/** A slice of Settings: a list that navigates to sub-screens with switches. */
export const settingsApp: AppModel = {
  packageName: "com.android.settings",
  label: "Settings",
  mainActivity: ".Settings",
  activities: { ".Settings$DisplaySettingsActivity": "display", ".Settings$DeviceInfoSettingsActivity": "about" },
  screen(name, { prop }) {
    const color = "#455a64";
    switch (name) {
      case "main":
        return {
          title: "Settings",
          color,
          items: [
            { kind: "row", id: "network", text: "Network & internet", onTap: { type: "navigate", screen: "network" } },
            { kind: "row", id: "display", text: "Display", onTap: { type: "navigate", screen: "display" } },
            { kind: "row", id: "about", text: "About phone", onTap: { type: "navigate", screen: "about" } },
          ],
        };
      case "network":
        return { title: "Network & internet", color, items: [{ kind: "switch", id: "wifi", text: "Wi-Fi", stateKey: "wifi" }, { kind: "switch", id: "airplane", text: "Airplane mode", stateKey: "airplane" }] };
      case "display":
        return { title: "Display", color, items: [{ kind: "switch", id: "dark_theme", text: "Dark theme", stateKey: "dark" }, { kind: "switch", id: "auto_rotate", text: "Auto-rotate screen", stateKey: "autorotate", enabled: false }] };
      case "about":
        return {
          title: "About phone",
          color,
          items: [
            { kind: "text", id: "model", text: `Model: ${prop("ro.product.model") ?? ""}` },
            { kind: "text", id: "android_version", text: `Android version: ${prop("ro.build.version.release") ?? ""}` },
            { kind: "text", id: "build_number", text: `Build number: ${prop("ro.build.display.id") ?? ""}` },
          ],
        };
      default:
        return undefined;
    }
  },
};
