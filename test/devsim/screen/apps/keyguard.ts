import type { ScreenSpec } from "../screen-spec.js";

export const SYSTEMUI_PACKAGE = "com.android.systemui";

/** The lock screen (no PIN): a swipe up or MENU dismisses it. */
export function keyguardScreen(now: Date): ScreenSpec {
  const time = `${String(now.getUTCHours()).padStart(2, "0")}:${String(now.getUTCMinutes()).padStart(2, "0")}`;
  return {
    color: "#000000",
    background: "#101418",
    items: [
      { kind: "text", id: "clock_view", text: time, contentDesc: time },
      { kind: "text", id: "keyguard_indication_text", text: "Swipe up to open" },
    ],
  };
}
