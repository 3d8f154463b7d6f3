import { describe, expect, it } from "vitest";
import { RelayedCalls } from "./relayed-calls.js";

describe("relayed calls", () => {
  it("aborts the running call a cancel names, and no other", () => {
    const calls = new RelayedCalls();
    const a = calls.begin("agent-1", "r1");
    const b = calls.begin("agent-1", "r2");
    const c = calls.begin("agent-2", "r1");
    expect(calls.cancel("agent-1", "r1")).toBe(true);
    expect(a.signal.aborted).toBe(true);
    expect(b.signal.aborted).toBe(false);
    expect(c.signal.aborted).toBe(false);
    // Not a deadline: the holding replica's AttachSession passes it on to the agent.
    expect((a.signal.reason as Error).name).not.toBe("TimeoutError");
    a.end();
    b.end();
    c.end();
    expect(calls.size).toEqual({ running: 0, early: 0 });
  });

  it("applies a cancel that came before its call when the call begins", () => {
    const calls = new RelayedCalls();
    expect(calls.cancel("agent-1", "r1")).toBe(false);
    expect(calls.size).toEqual({ running: 0, early: 1 });
    const a = calls.begin("agent-1", "r1");
    expect(a.signal.aborted).toBe(true);
    a.end();
    expect(calls.size).toEqual({ running: 0, early: 0 });
  });

  it("a cancel after the call ended aborts nothing, and is forgotten after a while", async () => {
    const calls = new RelayedCalls(20);
    const a = calls.begin("agent-1", "r1");
    a.end();
    expect(calls.cancel("agent-1", "r1")).toBe(false);
    expect(a.signal.aborted).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(calls.size).toEqual({ running: 0, early: 0 });
  });

  it("keeps at most `max` early cancels, forgetting the oldest", () => {
    const calls = new RelayedCalls(60_000, 2);
    calls.cancel("a", "1");
    calls.cancel("a", "2");
    calls.cancel("a", "3");
    expect(calls.size.early).toBe(2);
    expect(calls.begin("a", "1").signal.aborted).toBe(false);
    expect(calls.begin("a", "3").signal.aborted).toBe(true);
  });

  it("a call without a relay id cannot be cancelled", () => {
    const calls = new RelayedCalls();
    const a = calls.begin("agent-1", "");
    expect(calls.cancel("agent-1", "")).toBe(false);
    expect(a.signal.aborted).toBe(false);
    expect(calls.size).toEqual({ running: 0, early: 0 });
  });
});
