/** Android KeyEvent codes the simulator reacts to (others are accepted and ignored). */
export const KEYCODE: Record<string, number> = {
  KEYCODE_HOME: 3,
  KEYCODE_BACK: 4,
  KEYCODE_DPAD_UP: 19,
  KEYCODE_DPAD_DOWN: 20,
  KEYCODE_POWER: 26,
  KEYCODE_ENTER: 66,
  KEYCODE_DEL: 67,
  KEYCODE_MENU: 82,
  // The simulated text cursor is always at the end: accepted, nothing to move.
  KEYCODE_MOVE_END: 123,
  KEYCODE_APP_SWITCH: 187,
  KEYCODE_SLEEP: 223,
  KEYCODE_WAKEUP: 224,
};

/** `66`, `KEYCODE_ENTER` or `ENTER` → 66; undefined if unknown. */
export function parseKeycode(text: string): number | undefined {
  if (/^[0-9]+$/.test(text)) return Number(text);
  const name = text.toUpperCase();
  return KEYCODE[name] ?? KEYCODE[`KEYCODE_${name}`];
}
