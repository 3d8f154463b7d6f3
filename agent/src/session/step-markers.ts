/**
 * farm's own step markers: around a step that keeps a device log the agent
 * logs `farmstep: begin ID` and `farmstep: end ID` with Android's `log`
 * tool (device-log.ts). They bound the step's window but are farm's, not
 * the app's: every log farm shows the user leaves them out.
 */

/** The tag of the markers. */
export const STEP_MARK_TAG = "farmstep";

/** The message of a marker: begin or end and the window's 12-hex-digit id. */
export const stepMarkerMessage = (what: "begin" | "end", id: string) => `${STEP_MARK_TAG}: ${what} ${id}`;

// threadtime: "MM-DD HH:MM:SS.mmm  PID  TID P TAG: message"; only farm's exact marker lines match.
const MARKER_LINE = new RegExp(`^\\S+ \\S+\\s+\\d+\\s+\\d+ [VDIWEFS] ${STEP_MARK_TAG}\\s*: (begin|end) [0-9a-f]{12}\\r?$`);

/** True for a threadtime line that is one of farm's step markers. */
export const isStepMarkerLine = (line: string) => MARKER_LINE.test(line);

/** A threadtime log without farm's step markers; every other line as it was. */
export function withoutStepMarkers(text: string): string {
  return text.split("\n").filter((l) => !isStepMarkerLine(l)).join("\n");
}
