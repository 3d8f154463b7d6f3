import { describe, expect, it } from "vitest";
import { ELEMENT_REFERENCE_KEY, gesturesFromActions, MAX_ACTIONS_PER_SOURCE, MAX_SOURCES } from "./pointer-actions.js";
import { WebDriverError } from "./webdriver-error.js";

function wdError(f: () => unknown): WebDriverError {
  try {
    f();
  } catch (e) {
    if (e instanceof WebDriverError) return e;
    throw e;
  }
  throw new Error("expected a WebDriverError");
}

const origins: Record<string, { x: number; y: number }> = { "el-1": { x: 540, y: 360 } };
const originOf = (id: string) => {
  const o = origins[id];
  if (!o) throw new WebDriverError("no such element", `no element ${id}`);
  return o;
};
const finger = (actions: unknown[], parameters: unknown = { pointerType: "touch" }) => ({ type: "pointer", id: "finger1", parameters, actions });
const body = (...sources: unknown[]) => ({ actions: sources });
const move = (x: number, y: number, extra: Record<string, unknown> = {}) => ({ type: "pointerMove", x, y, ...extra });
const downUp = [{ type: "pointerDown", button: 0 }, { type: "pointerUp", button: 0 }];
const pause = (duration: number) => ({ type: "pause", duration });

describe("gesturesFromActions", () => {
  it("reads WebdriverIO's tap (move, down, short pause, up) as a tap at the point", () => {
    const tap = body(finger([move(100, 200, { duration: 100, origin: "viewport" }), { type: "pointerDown", button: 0 }, pause(50), { type: "pointerUp", button: 0 }]));
    expect(gesturesFromActions(tap, originOf)).toEqual([{ kind: "tap", x: 100, y: 200 }]);
    // The bare array of sources reads the same.
    expect(gesturesFromActions(tap.actions, originOf)).toEqual([{ kind: "tap", x: 100, y: 200 }]);
  });

  it("reads a press held at one point for 500 ms or more as a long press (a swipe to the same point)", () => {
    expect(gesturesFromActions(body(finger([move(10, 20), { type: "pointerDown", button: 0 }, pause(499), { type: "pointerUp", button: 0 }])), originOf)).toEqual([{ kind: "tap", x: 10, y: 20 }]);
    expect(gesturesFromActions(body(finger([move(10, 20), { type: "pointerDown", button: 0 }, pause(300), pause(300), { type: "pointerUp", button: 0 }])), originOf)).toEqual([
      { kind: "swipe", x1: 10, y1: 20, x2: 10, y2: 20, durationMs: 600 },
    ]);
  });

  it("reads a press moved before release as one straight swipe over the summed durations", () => {
    const swipe = body(
      finger([
        move(500, 1600, { duration: 0 }),
        { type: "pointerDown", button: 0 },
        pause(100),
        move(500, 1200, { duration: 200 }),
        move(0, -800, { duration: 300, origin: "pointer" }),
        { type: "pointerUp", button: 0 },
      ]),
    );
    expect(gesturesFromActions(swipe, originOf)).toEqual([{ kind: "swipe", x1: 500, y1: 1600, x2: 500, y2: 400, durationMs: 600 }]);
    // A flick: no time given, the device's own speed.
    expect(gesturesFromActions(body(finger([move(1, 2), downUp[0], move(30, 40), downUp[1]])), originOf)).toEqual([{ kind: "swipe", x1: 1, y1: 2, x2: 30, y2: 40, durationMs: 0 }]);
  });

  it("moves from an element's centre (W3C and legacy references), from the pointer, and rounds fractions", () => {
    expect(gesturesFromActions(body(finger([move(0, 0, { origin: { [ELEMENT_REFERENCE_KEY]: "el-1" } }), ...downUp])), originOf)).toEqual([{ kind: "tap", x: 540, y: 360 }]);
    expect(gesturesFromActions(body(finger([move(-40, 10.6, { origin: { ELEMENT: "el-1" } }), ...downUp])), originOf)).toEqual([{ kind: "tap", x: 500, y: 371 }]);
    expect(gesturesFromActions(body(finger([move(10, 10), move(5, -5, { origin: "pointer" }), ...downUp])), originOf)).toEqual([{ kind: "tap", x: 15, y: 5 }]);
    // The pointer starts at (0,0).
    expect(gesturesFromActions(body(finger([...downUp])), originOf)).toEqual([{ kind: "tap", x: 0, y: 0 }]);
    // The element's own error reaches the client.
    expect(wdError(() => gesturesFromActions(body(finger([move(0, 0, { origin: { [ELEMENT_REFERENCE_KEY]: "gone" } }), ...downUp])), originOf)).code).toBe("no such element");
  });

  it("answers several gestures in order (a double tap), and none for moves and pauses alone", () => {
    expect(gesturesFromActions(body(finger([move(5, 5), ...downUp, pause(80), ...downUp])), originOf)).toEqual([
      { kind: "tap", x: 5, y: 5 },
      { kind: "tap", x: 5, y: 5 },
    ]);
    expect(gesturesFromActions(body(finger([move(5, 5), pause(10)])), originOf)).toEqual([]);
    expect(gesturesFromActions(body(), originOf)).toEqual([]);
  });

  it("times a tick by its longest action across sources (Selenium pads with key pauses)", () => {
    const padded = body(
      { type: "key", id: "default keyboard", actions: [pause(0), pause(0), pause(700), pause(0)] },
      finger([move(300, 300), { type: "pointerDown", button: 0 }, pause(0), { type: "pointerUp", button: 0 }], { pointerType: "mouse" }),
    );
    expect(gesturesFromActions(padded, originOf)).toEqual([{ kind: "swipe", x1: 300, y1: 300, x2: 300, y2: 300, durationMs: 700 }]);
    const none = body({ type: "none", id: "idle", actions: [pause(0), pause(200)] }, finger([move(1, 1), { type: "pointerDown", button: 0 }, { type: "pointerUp", button: 0 }]));
    expect(gesturesFromActions(none, originOf)).toEqual([{ kind: "tap", x: 1, y: 1 }]);
    // Pointer parameters may be left out (a mouse), and pen reads like touch.
    expect(gesturesFromActions(body({ type: "pointer", id: "p", actions: [move(2, 3), ...downUp] }), originOf)).toEqual([{ kind: "tap", x: 2, y: 3 }]);
    expect(gesturesFromActions(body(finger([move(2, 3), ...downUp], { pointerType: "pen" })), originOf)).toEqual([{ kind: "tap", x: 2, y: 3 }]);
  });

  it("answers invalid argument naming the field for anything malformed", () => {
    const cases: [unknown, string][] = [
      [null, "actions must be an array"],
      [{ actions: "tap" }, "actions must be an array"],
      [{ actions: [5] }, "actions[0] must be an object"],
      [body({ type: "pointer", actions: [] }), "actions[0].id must be a non-empty string"],
      [body({ type: "pointer", id: "", actions: [] }), "actions[0].id must be a non-empty string"],
      [body({ type: "pointer", id: "a" }), "actions[0].actions must be an array"],
      [body({ type: "finger", id: "a", actions: [] }), "actions[0].type must be \"pointer\", \"key\", \"none\" or \"wheel\", not \"finger\""],
      [body(finger([], "touch")), "actions[0].parameters must be an object"],
      [body(finger([], { pointerType: "stylus" })), "actions[0].parameters.pointerType must be \"mouse\", \"pen\" or \"touch\", not \"stylus\""],
      [body(finger([{ type: "tap" }])), "actions[0].actions[0].type must be \"pause\", \"pointerMove\", \"pointerDown\" or \"pointerUp\", not \"tap\""],
      [body(finger([7])), "actions[0].actions[0] must be an object"],
      [body(finger([move(0, 0), pause(-1)])), "actions[0].actions[1].duration must be a whole number of milliseconds"],
      [body(finger([pause(1.5)])), "actions[0].actions[0].duration must be a whole number"],
      [body(finger([{ type: "pause", duration: "100" }])), "actions[0].actions[0].duration must be a whole number"],
      [body(finger([pause(60_001)])), "actions[0].actions[0].duration is 60001 ms; farm performs at most 60000 ms"],
      [body(finger([{ type: "pointerMove", y: 1 }])), "actions[0].actions[0].x must be a number of pixels, not nothing"],
      [body(finger([{ type: "pointerMove", x: 1, y: "2" }])), "actions[0].actions[0].y must be a number of pixels, not \"2\""],
      [body(finger([move(Number.NaN, 1)])), "actions[0].actions[0].x must be a number"],
      [body(finger([move(1e9, 1)])), "actions[0].actions[0].x must be a number"],
      [body(finger([move(1, 1, { origin: "screen" })])), "actions[0].actions[0].origin must be \"viewport\", \"pointer\" or an element reference, not \"screen\""],
      [body(finger([move(1, 1, { origin: { id: "el-1" } })])), "actions[0].actions[0].origin an element origin must be"],
      [body(finger([{ type: "pointerDown" }])), "actions[0].actions[0].button must be a whole number, 0 or more, not nothing"],
      [body(finger([{ type: "pointerDown", button: -1 }])), "actions[0].actions[0].button must be a whole number"],
      [body(finger([{ type: "pointerUp", button: 0 }])), "actions[0].actions[0] releases the pointer, which is not down"],
      [body(finger([{ type: "pointerDown", button: 0 }, { type: "pointerDown", button: 0 }])), "actions[0].actions[1] presses the pointer again while it is down since actions[0].actions[0]"],
      [body(finger([{ type: "pointerDown", button: 0 }, pause(10)])), "actions[0].actions[0] presses the pointer and never releases it"],
      [body(finger([{ type: "pointerDown", button: 0 }, pause(60_000), pause(1), { type: "pointerUp", button: 0 }])), "actions[0].actions[3] ends a press held 60001 ms"],
      [body({ type: "none", id: "n", actions: [{ type: "keyDown", value: "a" }] }), "actions[0].actions[0].type must be \"pause\", not \"keyDown\""],
      [body(finger([]), { ...finger([]) }), "actions[1].id repeats the id \"finger1\" of actions[0]"],
      [{ actions: Array.from({ length: MAX_SOURCES + 1 }, (_, i) => ({ type: "none", id: `n${i}`, actions: [] })) }, `actions has ${MAX_SOURCES + 1} input sources`],
      [body(finger(Array.from({ length: MAX_ACTIONS_PER_SOURCE + 1 }, () => pause(0)))), `actions[0].actions has ${MAX_ACTIONS_PER_SOURCE + 1} actions`],
    ];
    for (const [input, says] of cases) {
      const e = wdError(() => gesturesFromActions(input, originOf));
      expect([says, e.code]).toEqual([says, "invalid argument"]);
      expect([says, e.message]).toEqual([says, expect.stringContaining(says)]);
    }
  });

  it("answers unsupported operation for keys, wheels, multi-touch, other buttons and cancel", () => {
    const cases: [unknown, string][] = [
      [body({ type: "key", id: "k", actions: [{ type: "keyDown", value: "a" }, { type: "keyUp", value: "a" }] }), "key actions are not supported"],
      [body({ type: "wheel", id: "w", actions: [{ type: "scroll", x: 0, y: 0, deltaX: 0, deltaY: 100 }] }), "wheel input sources are not supported"],
      [body(finger([move(1, 1), ...downUp]), { ...finger([move(9, 9), ...downUp]), id: "finger2" }), "2 pointer sources (multi-touch)"],
      [body(finger([{ type: "pointerDown", button: 2 }, { type: "pointerUp", button: 2 }])), "only the primary button (0)"],
      [body(finger([{ type: "pointerDown", button: 0 }, { type: "pointerCancel" }])), "pointerCancel is not supported"],
    ];
    for (const [input, says] of cases) {
      const e = wdError(() => gesturesFromActions(input, originOf));
      expect([says, e.code]).toEqual([says, "unsupported operation"]);
      expect([says, e.message]).toEqual([says, expect.stringContaining(says)]);
    }
  });

  it("answers move target out of bounds for a point off the left or top of the screen", () => {
    const e = wdError(() => gesturesFromActions(body(finger([move(10, 10), move(-20, 0, { origin: "pointer" }), ...downUp])), originOf));
    expect(e.code).toBe("move target out of bounds");
    expect(e.message).toContain("actions[0].actions[1]");
    expect(e.message).toContain("(-10, 10)");
  });

  it("validates every source before answering anything (a bad source after a good one still fails)", () => {
    const e = wdError(() => gesturesFromActions(body(finger([move(1, 1), ...downUp]), { type: "none", id: "n", actions: [pause(-5)] }), originOf));
    expect(e.code).toBe("invalid argument");
    expect(e.message).toContain("actions[1].actions[0].duration");
  });
});
