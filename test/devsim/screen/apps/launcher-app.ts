import type { AppModel } from "../screen-spec.js";

/** The home screen: one icon per launchable app; tapping one starts it. */
export const launcherApp: AppModel = {
  packageName: "com.android.launcher3",
  label: "Quickstep",
  mainActivity: ".Launcher",
  activities: {},
  screen: (name, { launchable }) =>
    name !== "main"
      ? undefined
      : {
        color: "#1a237e",
        background: "#283593",
        layout: "grid",
        items: launchable.map(({ packageName, label }) => ({
          kind: "icon" as const,
          text: label,
          contentDesc: label,
          onTap: { type: "launch" as const, packageName },
        })),
      },
};
