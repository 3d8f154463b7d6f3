import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import type { StreamRequest, StreamResponse, UnaryRequest, UnaryResponse } from "@connectrpc/connect";
import { toErrorReport } from "@farm/shared/errors";
import { isRevocation, OpenCalls } from "./open-calls.js";

const unaryReq = (signal: AbortSignal) => ({ stream: false, signal, message: {} }) as unknown as UnaryRequest;
const streamReq = (signal: AbortSignal, message: AsyncIterable<unknown> = (async function* () {})()) => ({ stream: true, signal, message }) as unknown as StreamRequest;
const never = new Promise<never>(() => undefined);

// A real collection, to tell what a stream still holds from what it let go.
setFlagsFromString("--expose-gc");
const collectGarbage = runInNewContext("gc") as () => void;

describe("open calls", () => {
  it("forgets a call once it ends, whichever way", async () => {
    const calls = new OpenCalls();
    await calls.run("alice", unaryReq(new AbortController().signal), async () => ({ stream: false, message: 1 }) as unknown as UnaryResponse);
    await expect(calls.run("alice", unaryReq(new AbortController().signal), () => Promise.reject(new Error("handler failed")))).rejects.toThrow("handler failed");
    const res = (await calls.run("alice", streamReq(new AbortController().signal), async () =>
      ({
        stream: true,
        message: (async function* () {
          yield 1;
          yield 2;
        })(),
      }) as unknown as StreamResponse)) as StreamResponse;
    expect(calls.count("alice")).toBe(1);
    const got: unknown[] = [];
    for await (const m of res.message) got.push(m);
    expect(got).toEqual([1, 2]);
    // A caller that goes away before the response is read.
    const caller = new AbortController();
    await calls.run("alice", streamReq(caller.signal), async () =>
      ({
        stream: true,
        message: (async function* () {
          yield 1;
        })(),
      }) as unknown as StreamResponse);
    caller.abort();
    expect(calls.count("alice")).toBe(0);
  });

  it("fails a waiting unary call at once when its token is revoked, and aborts its handler", async () => {
    const calls = new OpenCalls();
    let handlerSignal: AbortSignal | undefined;
    const pending = calls.run("bob", unaryReq(new AbortController().signal), (req) => {
      handlerSignal = req.signal;
      return never;
    });
    expect(calls.count("bob")).toBe(1);
    expect(calls.revoke("bob")).toBe(1);
    const err = await pending.then(() => null, (e: unknown) => e);
    expect(toErrorReport(err)).toMatchObject({ code: "UNAUTHENTICATED", message: expect.stringContaining("token revoked") });
    expect(handlerSignal?.aborted).toBe(true);
    expect(isRevocation(handlerSignal?.reason)).toBe(true);
    expect(calls.count("bob")).toBe(0);
  });

  it("ends a stream that never yields again, both ways, and only the revoked token's", async () => {
    const calls = new OpenCalls();
    const forever = () =>
      (async function* () {
        await never;
        yield 0;
      })();
    const bobs = (await calls.run("bob", streamReq(new AbortController().signal, forever()), async (req) => {
      // The handler reads its input; a revocation ends that read too.
      const reading = (req as StreamRequest).message[Symbol.asyncIterator]().next();
      reading.catch(() => undefined);
      return { stream: true, message: forever() } as unknown as StreamResponse;
    })) as StreamResponse;
    const carols = (await calls.run("carol", streamReq(new AbortController().signal), async () => ({ stream: true, message: forever() }) as unknown as StreamResponse)) as StreamResponse;
    const bobNext = bobs.message[Symbol.asyncIterator]().next();
    const carolNext = carols.message[Symbol.asyncIterator]().next();
    let carolSettled = false;
    void carolNext.then(() => (carolSettled = true), () => (carolSettled = true));
    calls.revoke("bob");
    const err = await bobNext.then(() => null, (e: unknown) => e);
    expect(toErrorReport(err)).toMatchObject({ code: "UNAUTHENTICATED" });
    await new Promise((r) => setTimeout(r, 20));
    expect(carolSettled).toBe(false);
    expect(calls.count("carol")).toBe(1);
    expect(calls.count("bob")).toBe(0);
  });

  it("lets go of each message once it has passed, however long the stream stays open", async () => {
    // A tunnel's push or a day of logcat is one stream: what passed through it must not stay in memory.
    const calls = new OpenCalls();
    let passed = 0;
    const refs: WeakRef<object>[] = [];
    const source = (async function* () {
      for (;;) {
        const message = { bytes: new Uint8Array(1024) };
        refs.push(new WeakRef(message));
        passed++;
        yield message;
      }
    })();
    const reqSource = (async function* () {
      for (;;) yield { bytes: new Uint8Array(1024) };
    })();
    const res = (await calls.run("dave", streamReq(new AbortController().signal, reqSource), async (req) => {
      const it = (req as StreamRequest).message[Symbol.asyncIterator]();
      for (let i = 0; i < 50; i++) refs.push(new WeakRef((await it.next()).value as object));
      return { stream: true, message: source } as unknown as StreamResponse;
    })) as StreamResponse;
    const it = res.message[Symbol.asyncIterator]();
    for (let i = 0; i < 50; i++) await it.next();
    expect(passed).toBe(50);
    await new Promise((r) => setImmediate(r));
    collectGarbage();
    // Both directions, every message but the last one or two the iterators may still hold.
    expect(refs.filter((r) => r.deref() !== undefined).length).toBeLessThanOrEqual(4);
    expect(calls.count("dave")).toBe(1);
  });
});
