import { describe, expect, it } from "vitest";
import { ByteBudget } from "./byte-budget.js";

describe("ByteBudget", () => {
  it("counts a tunnel's bytes in the agent's too, and lets a waiter on either go once both have room", async () => {
    const agent = new ByteBudget(100);
    const a = new ByteBudget(60, agent);
    const b = new ByteBudget(60, agent);
    a.take(60);
    expect(a.fits(1)).toBe(false);
    expect(b.fits(40)).toBe(true);
    b.take(40);
    // b has room of its own, the agent has none.
    expect(b.fits(10)).toBe(false);
    let resumed = false;
    const waiting = b.room(10, new AbortController().signal).then(() => (resumed = true));
    await new Promise((r) => setImmediate(r));
    expect(resumed).toBe(false);
    a.release(30); // room comes back through the agent's budget
    await waiting;
    expect(resumed).toBe(true);
    expect({ agent: agent.held, a: a.held, b: b.held, peak: agent.peak }).toEqual({ agent: 70, a: 30, b: 40, peak: 100 });
  });

  it("lets one chunk larger than the whole budget through once nothing else is held, so a stream never wedges", () => {
    const budget = new ByteBudget(10);
    expect(budget.fits(50)).toBe(true);
    budget.take(50);
    expect(budget.fits(1)).toBe(false);
    budget.release(50);
    expect(budget.held).toBe(0);
  });

  it("stops waiting when the stream is closed", async () => {
    const budget = new ByteBudget(10);
    budget.take(10);
    const closed = new AbortController();
    const waiting = budget.room(5, closed.signal);
    closed.abort();
    await waiting;
    expect(budget.fits(5)).toBe(false);
  });

  it("refuses a budget that is not a positive whole number of bytes", () => {
    expect(() => new ByteBudget(0)).toThrow(RangeError);
    expect(() => new ByteBudget(1.5)).toThrow(RangeError);
  });
});
