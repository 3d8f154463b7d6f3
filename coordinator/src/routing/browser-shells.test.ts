import { describe, expect, it } from "vitest";
import { toErrorReport } from "@farm/shared/errors";
import { BrowserShells } from "./browser-shells.js";

describe("browser shells", () => {
  it("takes input only from the caller that opened the shell, and only while it is open", async () => {
    const shells = new BrowserShells();
    const shell = shells.open("alice");
    expect(shell.id).toMatch(/^[A-Za-z0-9_-]{24}$/);
    expect(shells.get(shell.id, "alice")).toBe(shell);
    // Another caller's shell is as unknown as one that never was.
    expect(() => shells.get(shell.id, "bob")).toThrow(/no such shell/);
    expect(toErrorReport(catchOf(() => shells.get(shell.id, "bob"))).code).toBe("NOT_FOUND");
    await shell.send({ case: "stdin", value: new Uint8Array([104, 105]) }, new AbortController().signal);
    const it = shell.input[Symbol.asyncIterator]();
    expect((await it.next()).value).toEqual({ case: "stdin", value: new Uint8Array([104, 105]) });
    shells.close(shell);
    expect(shells.size).toBe(0);
    expect(() => shells.get(shell.id, "alice")).toThrow(/no such shell/);
    await expect(shell.send({ case: "stdin", value: new Uint8Array([1]) }, new AbortController().signal)).rejects.toThrow(/ended/);
  });

  it("makes a caller that types faster than the shell reads wait, and gives up with its call", async () => {
    const shells = new BrowserShells();
    const shell = shells.open("alice");
    const signal = new AbortController().signal;
    let sent = 0;
    // Nobody reads: the queue fills, then a send waits.
    for (;;) {
      const done = await Promise.race([shell.send({ case: "stdin", value: new Uint8Array([1]) }, signal).then(() => true), new Promise((r) => setImmediate(() => r(false)))]);
      if (!done) break;
      sent++;
    }
    expect(sent).toBeGreaterThan(0);
    expect(sent).toBeLessThan(100);
    const caller = new AbortController();
    const waiting = shell.send({ case: "stdin", value: new Uint8Array([2]) }, caller.signal);
    caller.abort();
    await expect(waiting).rejects.toThrow(/ended/);
    shells.close(shell);
  });
});

function catchOf(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return undefined;
}
