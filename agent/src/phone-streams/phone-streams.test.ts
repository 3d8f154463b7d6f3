import { describe, expect, it } from "vitest";
import { createLogger } from "@farm/shared/log";
import { PhoneStreams, type PhoneStreamKind } from "./phone-streams.js";

const log = createLogger({ level: "error" });

/** Resolves once `check` holds, re-checked on every turn of the event loop (no wall-clock margin). */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((r) => setImmediate(r));
}

function kind(over: Partial<PhoneStreamKind<string>> & Pick<PhoneStreamKind<string>, "serve" | "produce">): PhoneStreamKind<string> {
  return { noun: "test stream", max: 2, queued: 2, log, opening: (id) => `open ${id}`, ...over };
}

describe("PhoneStreams", () => {
  it("opens the call with the stream's name, sends what the phone gives, and stops reading the phone when the coordinator ends the call", async () => {
    const received: string[] = [];
    let produceStopped = false;
    const streams = new PhoneStreams(kind({
      async *serve(requests) {
        for await (const r of requests) {
          received.push(r);
          if (received.length === 3) return; // the coordinator is done (its last viewer left)
        }
      },
      async produce(serial, send, signal) {
        await send(`${serial} a`);
        await send(`${serial} b`);
        await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
        produceStopped = true;
      },
    }));
    streams.start("s1", "SER");
    expect(streams.size).toBe(1);
    await until(() => produceStopped && streams.size === 0);
    expect(received).toEqual(["open s1", "SER a", "SER b"]);
  });

  it("refuses a stream id already streaming and more streams than its kind allows", async () => {
    const streams = new PhoneStreams(kind({
      async *serve(requests) {
        for await (const _ of requests) {
          // reads until closed
        }
      },
      produce: (_serial, _send, signal) => new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true })),
    }));
    streams.start("s1", "A");
    expect(() => streams.start("s1", "A")).toThrow(/test stream s1 is already streaming/);
    streams.start("s2", "B");
    expect(() => streams.start("s3", "C")).toThrow(/already streams 2 test streams/);
    streams.stopAll();
    await until(() => streams.size === 0);
  });

  it("holds the phone's read when the coordinator does not read: no more than the queue waits", async () => {
    let sent = 0;
    let stopped = false;
    const streams = new PhoneStreams(kind({
      // A coordinator that never reads what is sent.
      serve: (_requests, signal) => ({
        [Symbol.asyncIterator]: () => ({ next: () => new Promise<IteratorResult<unknown>>((resolve) => signal.addEventListener("abort", () => resolve({ done: true, value: undefined }), { once: true })) }),
      }),
      async produce(_serial, send, signal) {
        while (!signal.aborted) {
          await send("frame");
          sent++;
        }
        stopped = true;
      },
    }));
    streams.start("s1", "A");
    // The opening message and two frames fill the queue of 2 past its first; the third send waits.
    await until(() => sent >= 1);
    for (let i = 0; i < 100; i++) await new Promise((r) => setImmediate(r));
    expect(sent).toBeLessThanOrEqual(2);
    streams.stopAll();
    await until(() => stopped && streams.size === 0);
  });
});
