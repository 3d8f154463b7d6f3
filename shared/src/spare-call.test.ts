import { describe, expect, it } from "vitest";
import { AsyncQueue } from "./async-queue.js";
import { SpareCalls } from "./spare-call.js";

/** A call as the server sees it: the requests it reads, the responses it sends, whether it was cancelled. */
interface ServerSide {
  requests: AsyncIterator<string>;
  signal: AbortSignal;
  respond(s: string): void;
  end(): void;
  fail(err: Error): void;
}

/** An echo-less stand-in server: each call is handed to the test as it starts, before any request is read. */
function server(): { call: (requests: AsyncIterable<string>, signal: AbortSignal) => AsyncIterable<string>; calls: ServerSide[] } {
  const calls: ServerSide[] = [];
  const call = (requests: AsyncIterable<string>, signal: AbortSignal) => {
    const out = new AsyncQueue<string>();
    let failWith!: (err: Error) => void;
    const failed = new Promise<never>((_, reject) => (failWith = reject));
    failed.catch(() => undefined);
    const aborted = new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(new Error("cancelled")), { once: true }));
    aborted.catch(() => undefined);
    calls.push({ requests: requests[Symbol.asyncIterator](), signal, respond: (s) => out.push(s), end: () => out.close(), fail: (e) => failWith(e) });
    return (async function* () {
      const it = out[Symbol.asyncIterator]();
      for (;;) {
        const r = await Promise.race([it.next(), failed, aborted]);
        if (r.done) return;
        yield r.value;
      }
    })();
  };
  return { call, calls };
}

async function* from(...items: string[]): AsyncGenerator<string> {
  yield* items;
}

async function collect(it: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const s of it) out.push(s);
  return out;
}

const turn = () => new Promise((r) => setImmediate(r));

describe("SpareCalls", () => {
  it("starts the first call fresh, opens a spare once it ended, and runs the next call's requests and responses on that spare", async () => {
    const srv = server();
    const spares = new SpareCalls(srv.call);
    const first = collect(spares.start(from("a"), new AbortController().signal));
    expect(srv.calls).toHaveLength(1);
    expect((await srv.calls[0]?.requests.next())?.value).toBe("a");
    srv.calls[0]?.respond("A");
    srv.calls[0]?.end();
    expect(await first).toEqual(["A"]);
    // Its end opened the spare: started, nothing read from it yet.
    expect(srv.calls).toHaveLength(2);
    const spare = srv.calls[1] as ServerSide;
    const read = spare.requests.next();
    await turn();
    const second = collect(spares.start(from("b", "c"), new AbortController().signal));
    expect(srv.calls).toHaveLength(2);
    expect((await read).value).toBe("b");
    expect((await spare.requests.next()).value).toBe("c");
    expect((await spare.requests.next()).done).toBe(true);
    spare.respond("B");
    spare.end();
    expect(await second).toEqual(["B"]);
    spares.close();
  });

  it("does not use a spare that failed before it was needed: the stream gets a fresh call", async () => {
    const srv = server();
    const spares = new SpareCalls(srv.call);
    spares.prepare();
    srv.calls[0]?.fail(new Error("connection lost"));
    await turn();
    const got = collect(spares.start(from("x"), new AbortController().signal));
    expect(srv.calls).toHaveLength(2);
    expect(srv.calls[0]?.signal.aborted).toBe(true);
    expect((await srv.calls[1]?.requests.next())?.value).toBe("x");
    srv.calls[1]?.respond("X");
    srv.calls[1]?.end();
    expect(await got).toEqual(["X"]);
    spares.close();
  });

  it("cancels the spare's call when its user cancels, and close() cancels the spare and opens no other", async () => {
    const srv = server();
    const spares = new SpareCalls(srv.call);
    spares.prepare();
    const user = new AbortController();
    const it = spares.start(from("y"), user.signal)[Symbol.asyncIterator]();
    const next = it.next();
    user.abort();
    await expect(next).rejects.toThrow("cancelled");
    expect(srv.calls[0]?.signal.aborted).toBe(true);
    // Ended (by failing): the next spare opened.
    await turn();
    expect(srv.calls).toHaveLength(2);
    spares.close();
    expect(srv.calls[1]?.signal.aborted).toBe(true);
    spares.prepare();
    expect(srv.calls).toHaveLength(2);
  });
});
