import { WebDriverError } from "./webdriver-error.js";

/**
 * What farm's input can do with one finger: a tap, or a straight swipe
 * (a long press is a swipe to the same point, held for its duration).
 * `durationMs` 0 leaves the speed to the device (`input swipe`'s default).
 */
export type Gesture =
  | { kind: "tap"; x: number; y: number }
  | { kind: "swipe"; x1: number; y1: number; x2: number; y2: number; durationMs: number };

/** W3C's key for an element reference in JSON (WebDriver §6.2); Appium's older "ELEMENT" is read too. */
export const ELEMENT_REFERENCE_KEY = "element-6066-11e4-a52e-4f735466cecf";
/** A press held this long at one point is a long press (Android's long-press timeout is 400–500 ms). */
export const LONG_PRESS_MS = 500;
/** Limits, checked before anything is interpreted: no gesture anyone performs comes near them. */
export const MAX_SOURCES = 8;
export const MAX_ACTIONS_PER_SOURCE = 1000;
export const MAX_DURATION_MS = 60_000;

type Point = { x: number; y: number };
type Origin = { kind: "viewport" } | { kind: "pointer" } | { kind: "element"; id: string };
type PointerAction =
  | { type: "pause"; duration: number }
  | { type: "pointerMove"; duration: number; x: number; y: number; origin: Origin; field: string }
  | { type: "pointerDown"; field: string }
  | { type: "pointerUp"; field: string };
type Source = { type: "pointer"; actions: PointerAction[] } | { type: "other"; durations: number[] };

/**
 * The gestures a W3C Perform Actions body (`{actions: [...]}`, or its
 * array) describes, in order. One pointer source (touch, mouse or pen;
 * the primary button) is read tick by tick; other sources may only pause
 * (key sources with pauses alone are common padding from Selenium
 * clients), and a tick lasts as long as its longest action, as W3C says.
 *
 * A press and release at one point is a tap, or a long press when held
 * `LONG_PRESS_MS` or more; a press moved before its release is a swipe
 * from where it went down to where it came up, over the time between
 * (intermediate points are dropped: farm swipes in a straight line).
 * Moves are from the viewport, the pointer's last position, or an
 * element's centre (`originOf`, which answers the endpoint's element
 * errors); the pointer starts at (0,0).
 *
 * Errors, before any gesture is answered: `invalid argument` naming the
 * field (`actions[0].actions[2].duration`); `unsupported operation` for
 * key presses, wheel sources, more than one pointer (multi-touch), other
 * buttons and pointerCancel; `move target out of bounds` for a point left
 * or above the screen.
 */
export function gesturesFromActions(actions: unknown, originOf: (elementId: string) => Point): Gesture[] {
  const list = isObject(actions) ? actions["actions"] : actions;
  const where = "actions";
  if (!Array.isArray(list)) throw invalidArgument(where, "must be an array of input sources");
  if (list.length > MAX_SOURCES) throw invalidArgument(where, `has ${list.length} input sources; farm reads at most ${MAX_SOURCES}`);
  const sources = list.map((s, i) => readSource(s, `${where}[${i}]`));
  checkIds(list, where);
  const pointers = sources.filter((s) => s.type === "pointer");
  if (pointers.length > 1) throw new WebDriverError("unsupported operation", `${pointers.length} pointer sources (multi-touch): farm performs one finger at a time`);
  const ticks = Math.max(0, ...sources.map((s) => (s.type === "pointer" ? s.actions.length : s.durations.length)));
  const tickMs = Array.from({ length: ticks }, (_, i) => Math.max(0, ...sources.map((s) => (s.type === "pointer" ? durationOf(s.actions[i]) : (s.durations[i] ?? 0)))));
  const pointer = pointers[0];
  return pointer ? interpret(pointer.actions, tickMs, originOf) : [];
}

function interpret(actions: readonly PointerAction[], tickMs: readonly number[], originOf: (elementId: string) => Point): Gesture[] {
  const gestures: Gesture[] = [];
  let at: Point = { x: 0, y: 0 };
  let down: { at: Point; tick: number; field: string } | undefined;
  actions.forEach((a, tick) => {
    switch (a.type) {
      case "pause":
        return;
      case "pointerMove": {
        const base = a.origin.kind === "viewport" ? { x: 0, y: 0 } : a.origin.kind === "pointer" ? at : originOf(a.origin.id);
        const to = { x: Math.round(base.x + a.x), y: Math.round(base.y + a.y) };
        if (to.x < 0 || to.y < 0) throw new WebDriverError("move target out of bounds", `${a.field}: the pointer would move to (${to.x}, ${to.y}), off the screen`);
        at = to;
        return;
      }
      case "pointerDown":
        if (down) throw invalidArgument(a.field, `presses the pointer again while it is down since ${down.field}`);
        down = { at, tick, field: a.field };
        return;
      case "pointerUp": {
        if (!down) throw invalidArgument(a.field, "releases the pointer, which is not down");
        const held = tickMs.slice(down.tick, tick).reduce((s, d) => s + d, 0);
        if (held > MAX_DURATION_MS) throw invalidArgument(a.field, `ends a press held ${held} ms; farm performs at most ${MAX_DURATION_MS} ms`);
        const from = down.at;
        if (from.x !== at.x || from.y !== at.y) gestures.push({ kind: "swipe", x1: from.x, y1: from.y, x2: at.x, y2: at.y, durationMs: held });
        else if (held >= LONG_PRESS_MS) gestures.push({ kind: "swipe", x1: at.x, y1: at.y, x2: at.x, y2: at.y, durationMs: held });
        else gestures.push({ kind: "tap", x: at.x, y: at.y });
        down = undefined;
        return;
      }
    }
  });
  if (down) throw invalidArgument(down.field, "presses the pointer and never releases it (add a pointerUp)");
  return gestures;
}

function durationOf(a: PointerAction | undefined): number {
  return a && (a.type === "pause" || a.type === "pointerMove") ? a.duration : 0;
}

function readSource(s: unknown, field: string): Source {
  if (!isObject(s)) throw invalidArgument(field, "must be an object");
  const type = s["type"];
  if (typeof s["id"] !== "string" || s["id"] === "") throw invalidArgument(`${field}.id`, "must be a non-empty string");
  const actions = s["actions"];
  if (!Array.isArray(actions)) throw invalidArgument(`${field}.actions`, "must be an array");
  if (actions.length > MAX_ACTIONS_PER_SOURCE) throw invalidArgument(`${field}.actions`, `has ${actions.length} actions; farm reads at most ${MAX_ACTIONS_PER_SOURCE}`);
  switch (type) {
    case "pointer":
      readPointerParameters(s["parameters"], `${field}.parameters`);
      return { type: "pointer", actions: actions.map((a, i) => readPointerAction(a, `${field}.actions[${i}]`)) };
    case "key":
    case "none":
      return { type: "other", durations: actions.map((a, i) => readPauseOnly(a, `${field}.actions[${i}]`, type)) };
    case "wheel":
      throw new WebDriverError("unsupported operation", `${field}: wheel input sources are not supported (farm swipes with a pointer)`);
    default:
      throw invalidArgument(`${field}.type`, `must be "pointer", "key", "none" or "wheel", not ${describe(type)}`);
  }
}

function readPointerParameters(p: unknown, field: string): void {
  if (p === undefined) return;
  if (!isObject(p)) throw invalidArgument(field, "must be an object");
  const t = p["pointerType"];
  if (t !== undefined && t !== "mouse" && t !== "pen" && t !== "touch") throw invalidArgument(`${field}.pointerType`, `must be "mouse", "pen" or "touch", not ${describe(t)}`);
}

function readPauseOnly(a: unknown, field: string, sourceType: "key" | "none"): number {
  if (!isObject(a)) throw invalidArgument(field, "must be an object");
  const type = a["type"];
  if (type === "pause") return readDuration(a, `${field}.duration`);
  if (sourceType === "key" && (type === "keyDown" || type === "keyUp")) {
    throw new WebDriverError("unsupported operation", `${field}: key actions are not supported; send text with Element Send Keys`);
  }
  throw invalidArgument(`${field}.type`, `must be ${sourceType === "key" ? "\"pause\", \"keyDown\" or \"keyUp\"" : "\"pause\""}, not ${describe(type)}`);
}

function readPointerAction(a: unknown, field: string): PointerAction {
  if (!isObject(a)) throw invalidArgument(field, "must be an object");
  const type = a["type"];
  switch (type) {
    case "pause":
      return { type, duration: readDuration(a, `${field}.duration`) };
    case "pointerMove": {
      const duration = readDuration(a, `${field}.duration`);
      const x = a["x"];
      const y = a["y"];
      if (typeof x !== "number" || !Number.isFinite(x) || Math.abs(x) > 1e6) throw invalidArgument(`${field}.x`, `must be a number of pixels, not ${describe(x)}`);
      if (typeof y !== "number" || !Number.isFinite(y) || Math.abs(y) > 1e6) throw invalidArgument(`${field}.y`, `must be a number of pixels, not ${describe(y)}`);
      return { type, duration, x, y, origin: readOrigin(a["origin"], `${field}.origin`), field };
    }
    case "pointerDown":
    case "pointerUp": {
      const button = a["button"];
      if (!Number.isInteger(button) || (button as number) < 0) throw invalidArgument(`${field}.button`, `must be a whole number, 0 or more, not ${describe(button)}`);
      if (button !== 0) throw new WebDriverError("unsupported operation", `${field}.button: only the primary button (0) is supported, not ${String(button)}`);
      return { type, field };
    }
    case "pointerCancel":
      throw new WebDriverError("unsupported operation", `${field}: pointerCancel is not supported`);
    default:
      throw invalidArgument(`${field}.type`, `must be "pause", "pointerMove", "pointerDown" or "pointerUp", not ${describe(type)}`);
  }
}

function readOrigin(o: unknown, field: string): Origin {
  if (o === undefined || o === "viewport") return { kind: "viewport" };
  if (o === "pointer") return { kind: "pointer" };
  if (isObject(o)) {
    const id = Object.hasOwn(o, ELEMENT_REFERENCE_KEY) ? o[ELEMENT_REFERENCE_KEY] : o["ELEMENT"];
    if (typeof id === "string" && id !== "") return { kind: "element", id };
    throw invalidArgument(field, `an element origin must be {"${ELEMENT_REFERENCE_KEY}": "<element id>"}`);
  }
  throw invalidArgument(field, `must be "viewport", "pointer" or an element reference, not ${describe(o)}`);
}

function readDuration(a: Record<string, unknown>, field: string): number {
  const d = a["duration"];
  if (d === undefined) return 0;
  if (!Number.isInteger(d) || (d as number) < 0) throw invalidArgument(field, `must be a whole number of milliseconds, 0 or more, not ${describe(d)}`);
  if ((d as number) > MAX_DURATION_MS) throw invalidArgument(field, `is ${String(d)} ms; farm performs at most ${MAX_DURATION_MS} ms`);
  return d as number;
}

/** W3C: an id names one source; the same id twice is refused rather than guessed at. */
function checkIds(list: readonly unknown[], where: string): void {
  const seen = new Map<string, number>();
  list.forEach((s, i) => {
    const id = (s as Record<string, unknown>)["id"] as string;
    const first = seen.get(id);
    if (first !== undefined) throw invalidArgument(`${where}[${i}].id`, `repeats the id ${JSON.stringify(id)} of ${where}[${first}]`);
    seen.set(id, i);
  });
}

function invalidArgument(field: string, message: string): WebDriverError {
  return new WebDriverError("invalid argument", `${field} ${message}`);
}

function describe(v: unknown): string {
  if (v === undefined) return "nothing";
  const s = JSON.stringify(v);
  return s === undefined ? typeof v : s.length > 40 ? `${s.slice(0, 37)}...` : s;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
