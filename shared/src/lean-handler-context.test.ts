import { Code, ConnectError, createContextKey, createContextValues, createHandlerContext } from "@connectrpc/connect";
import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { Health } from "./gen/grpc/health/v1/health_pb.js";
import { leanHandlerContext, type LeanHandlerContextInit } from "./lean-handler-context.js";

const method = Health.method.check;
const base = (over: Partial<LeanHandlerContextInit> = {}): LeanHandlerContextInit => ({
  service: Health,
  method,
  protocolName: "grpc",
  requestMethod: "POST",
  url: "http://127.0.0.1/grpc.health.v1.Health/Check",
  requestHeader: new Headers({ "x-a": "1" }),
  responseHeader: { "content-type": "application/grpc+proto" },
  responseTrailer: { "grpc-status": "0" },
  ...over,
});

/** What a handler can see of a context (its fields, its signal's state and reason). */
function visible(ctx: ReturnType<typeof createHandlerContext>) {
  return {
    service: ctx.service,
    method: ctx.method,
    protocolName: ctx.protocolName,
    requestMethod: ctx.requestMethod,
    url: ctx.url,
    requestHeader: [...ctx.requestHeader],
    responseHeader: [...ctx.responseHeader],
    responseTrailer: [...ctx.responseTrailer],
    aborted: ctx.signal.aborted,
    reason: ctx.signal.reason instanceof ConnectError ? { code: ctx.signal.reason.code, message: ctx.signal.reason.rawMessage } : ctx.signal.reason,
  };
}

/** The signal's abort, as an event. */
const aborted = (s: AbortSignal) => new Promise<unknown>((resolve) => (s.aborted ? resolve(s.reason) : s.addEventListener("abort", () => resolve(s.reason), { once: true })));

describe("leanHandlerContext", () => {
  it("shows a handler what Connect's createHandlerContext shows, and takes the request headers as they are", () => {
    const key = createContextKey("none");
    const values = createContextValues().set(key, "set");
    const init = base({ contextValues: values });
    const lean = leanHandlerContext(init);
    const connect = createHandlerContext(init);
    expect(visible(lean)).toEqual(visible(connect));
    expect(lean.values.get(key)).toBe("set");
    expect(lean.requestHeader).toBe(init.requestHeader);
    expect(lean.timeoutMs()).toBeUndefined();
    // A handler's own spread of the context (connect's mergeRequest) keeps every field.
    expect(Object.keys({ ...lean }).sort()).toEqual(expect.arrayContaining(["method", "requestHeader", "responseHeader", "responseTrailer", "service", "signal", "timeoutMs", "url", "values"]));
  });

  it("aborts at the deadline with Connect's DeadlineExceeded, and counts the time left down", async () => {
    const lean = leanHandlerContext(base({ timeoutMs: 20 }));
    const connect = createHandlerContext(base({ timeoutMs: 20 }));
    expect(lean.timeoutMs()).toBeLessThanOrEqual(20);
    await Promise.all([aborted(lean.signal), aborted(connect.signal)]);
    expect(visible(lean)).toEqual(visible(connect));
    expect(lean.signal.reason).toMatchObject({ code: Code.DeadlineExceeded });
    // A deadline already past: aborted at once, as Connect does.
    expect(visible(leanHandlerContext(base({ timeoutMs: 0 })))).toEqual(visible(createHandlerContext(base({ timeoutMs: 0 }))));
  });

  it("aborts with the request signal's reason, and stops listening to it once ended", async () => {
    const caller = new AbortController();
    const lean = leanHandlerContext(base({ requestSignal: caller.signal, timeoutMs: 60_000 }));
    const why = new ConnectError("the caller left", Code.Canceled);
    caller.abort(why);
    expect(await aborted(lean.signal)).toBe(why);
    // Already aborted when the call starts: aborted at once.
    expect(leanHandlerContext(base({ requestSignal: caller.signal })).signal.reason).toBe(why);
    // Ended by abort(): its reason, and a later request abort changes nothing.
    const second = new AbortController();
    const ended = leanHandlerContext(base({ requestSignal: second.signal, timeoutMs: 60_000 }));
    expect(getEventListeners(second.signal, "abort")).toHaveLength(1);
    const done = new ConnectError("the call has ended", Code.Canceled);
    ended.abort(done);
    expect(getEventListeners(second.signal, "abort")).toHaveLength(0);
    second.abort(new Error("later"));
    expect(ended.signal.reason).toBe(done);
  });
});
