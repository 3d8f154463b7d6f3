import { describe, expect, it } from "vitest";
import { getEventListeners } from "node:events";
import { linkedAbort } from "./linked-abort.js";

describe("linked abort", () => {
  it("aborts with the first source's reason, and leaves no listener on the sources once aborted or disposed", () => {
    const long = new AbortController();
    const short = new AbortController();
    const a = linkedAbort(short.signal, long.signal);
    expect(getEventListeners(long.signal, "abort")).toHaveLength(1);
    short.abort(new Error("cut"));
    expect(a.signal.aborted).toBe(true);
    expect((a.signal.reason as Error).message).toBe("cut");
    expect(getEventListeners(long.signal, "abort")).toHaveLength(0);

    const b = linkedAbort(long.signal);
    b.dispose();
    expect(getEventListeners(long.signal, "abort")).toHaveLength(0);
    long.abort();
    expect(b.signal.aborted).toBe(false);
  });

  it("is aborted at once when a source already is", () => {
    const done = AbortSignal.abort(new Error("gone"));
    const live = new AbortController();
    const a = linkedAbort(live.signal, done);
    expect(a.signal.aborted).toBe(true);
    expect((a.signal.reason as Error).message).toBe("gone");
    expect(getEventListeners(live.signal, "abort")).toHaveLength(0);
  });
});
