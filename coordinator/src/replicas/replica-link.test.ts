import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { actionError, Errors } from "@farm/shared/errors";
import { AgentCallResultSchema, type AgentCallResult } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { LinkRequestSchema, ReplicaService, type CallAgentRequest, type LinkRequest } from "@farm/shared/gen/farm/v1/replica_service_pb";
import { AsyncQueue } from "@farm/shared/async-queue";
import { fromLinkError, MAX_LINK_CALLS, serveLink, type RunRelayedCall } from "./link-server.js";
import { ReplicaLink } from "./replica-link.js";

/** A call the test answers when it wants, and the signal its cancel aborts. */
interface Held {
  req: CallAgentRequest;
  signal: AbortSignal;
  answer(result: AgentCallResult): void;
  fail(err: unknown): void;
}

/** Both ends of a link over Connect's in-memory transport, the far end serving calls as `run` says. */
function linked(run: RunRelayedCall, gone = new AbortController().signal) {
  const transport = createRouterTransport((router) =>
    router.service(ReplicaService, {
      link: (requests, ctx) => serveLink(requests, ctx.signal, run),
    })
  );
  return new ReplicaLink(createClient(ReplicaService, transport), gone);
}

function holding(): { run: RunRelayedCall; next(): Promise<Held> } {
  const held: Held[] = [];
  const waiters: (() => void)[] = [];
  let taken = 0;
  const run: RunRelayedCall = (req, signal) =>
    new Promise((answer, fail) => {
      held.push({ req, signal, answer, fail });
      waiters.shift()?.();
    });
  return {
    run,
    // The calls as they reach the far end, in order.
    next: () =>
      new Promise((resolve) => {
        const take = () => (taken < held.length ? resolve(held[taken++]!) : waiters.push(take));
        take();
      }),
  };
}

const call = (method: string) => ({ agentId: "agent-1", call: { method, requestedBy: "alice", requestedByAdmin: false, request: new Uint8Array([1, 2]) }, callerDeadlineMs: 123n });
const result = (commandId: string) => create(AgentCallResultSchema, { commandId });

describe("a replica link", () => {
  it("carries calls that overlap, each answer to its own call, in the order they finish, with the caller's identity", async () => {
    const far = holding();
    const link = linked(far.run);
    const first = link.call(call("/m/First"), 60_000);
    const second = link.call(call("/m/Second"), 60_000);
    const a = await far.next();
    const b = await far.next();
    expect([a.req.call?.method, b.req.call?.method]).toEqual(["/m/First", "/m/Second"]);
    expect(a.req).toMatchObject({ agentId: "agent-1", callerDeadlineMs: 123n, call: { requestedBy: "alice", requestedByAdmin: false, request: new Uint8Array([1, 2]) } });
    // The second finishes first.
    b.answer(result("two"));
    expect((await second.answer).commandId).toBe("two");
    a.answer(result("one"));
    expect((await first.answer).commandId).toBe("one");
    link.close();
  });

  it("brings back the far replica's own error for a call with its code and detail, and the link stays open", async () => {
    const far = holding();
    const link = linked(far.run);
    const sent = link.call(call("/m/X"), 60_000);
    (await far.next()).fail(actionError(Errors.AGENT_OFFLINE, "agent agent-1 is not attached to this coordinator replica", { dispatched: false, ambiguous: false }));
    const err = await sent.answer.then(() => undefined, (e: unknown) => ConnectError.from(e));
    expect(err?.code).toBe(Errors.AGENT_OFFLINE.status);
    expect(err?.rawMessage).toBe("agent agent-1 is not attached to this coordinator replica");
    expect(err?.findDetails(ErrorDetailSchema)[0]).toMatchObject({ code: "AGENT_OFFLINE", dispatched: false, ambiguous: false });
    const again = link.call(call("/m/Y"), 60_000);
    (await far.next()).answer(result("y"));
    expect((await again.answer).commandId).toBe("y");
    expect(link.closed).toBe(false);
    link.close();
  });

  it("passes a cancel to the call it names only, which still answers", async () => {
    const far = holding();
    const link = linked(far.run);
    const one = link.call(call("/m/One"), 60_000);
    const two = link.call(call("/m/Two"), 60_000);
    const a = await far.next();
    const b = await far.next();
    const aborted = new Promise((r) => a.signal.addEventListener("abort", r, { once: true }));
    one.cancel();
    await aborted;
    expect(b.signal.aborted).toBe(false);
    a.answer(result("cancelled, answered"));
    b.answer(result("two"));
    expect((await one.answer).commandId).toBe("cancelled, answered");
    expect((await two.answer).commandId).toBe("two");
    link.close();
  });

  it("fails the calls waiting on it, with no farm detail, when it ends; a new call on it is refused", async () => {
    const far = holding();
    const gone = new AbortController();
    const link = linked(far.run, gone.signal);
    const sent = link.call(call("/m/X"), 60_000);
    await far.next();
    // The far replica is gone (membership heard it): the link ends.
    gone.abort();
    const err = await sent.answer.then(() => undefined, (e: unknown) => ConnectError.from(e));
    expect(err).toBeDefined();
    expect(err?.findDetails(ErrorDetailSchema)).toEqual([]);
    expect(link.closed).toBe(true);
    await expect(link.call(call("/m/Y"), 60_000).answer).rejects.toMatchObject({ code: Code.Unavailable });
  });

  it("gives up on a call not answered in time (no farm detail: its outcome is unknown) and drops its late answer", async () => {
    const far = holding();
    const link = linked(far.run);
    const sent = link.call(call("/m/Slow"), 1);
    const err = await sent.answer.then(() => undefined, (e: unknown) => ConnectError.from(e));
    expect(err?.code).toBe(Code.DeadlineExceeded);
    expect(err?.findDetails(ErrorDetailSchema)).toEqual([]);
    (await far.next()).answer(result("late"));
    // The link still carries the next call.
    const next = link.call(call("/m/Next"), 60_000);
    (await far.next()).answer(result("next"));
    expect((await next.answer).commandId).toBe("next");
    link.close();
  });

  it("says a replica that does not know Link is unsupported (an older build)", async () => {
    const transport = createRouterTransport((router) => router.service(ReplicaService, {}));
    const link = new ReplicaLink(createClient(ReplicaService, transport), new AbortController().signal);
    const err = await link.call(call("/m/X"), 60_000).answer.then(() => undefined, (e: unknown) => ConnectError.from(e));
    expect(err?.code).toBe(Code.Unimplemented);
    expect(link.unsupported).toBe(true);
    expect(link.closed).toBe(true);
  });

  it(`runs at most ${MAX_LINK_CALLS} calls at once and refuses the next one TOO_MANY_STREAMS, taking calls again once one ends`, async () => {
    const { run, next } = holding();
    const requests = new AsyncQueue<LinkRequest>();
    const answers = serveLink(requests, new AbortController().signal, run)[Symbol.asyncIterator]();
    for (let id = 1n; id <= BigInt(MAX_LINK_CALLS) + 1n; id++) requests.push(create(LinkRequestSchema, { id, kind: { case: "call", value: call("Held") } }));
    // The first answer out is the refusal of the call over the bound; the others are all running.
    const refused = (await answers.next()).value!;
    expect(refused.id).toBe(BigInt(MAX_LINK_CALLS) + 1n);
    expect(refused.kind.case).toBe("error");
    const err = fromLinkError(refused.kind.value as Parameters<typeof fromLinkError>[0]);
    expect(err.findDetails(ErrorDetailSchema)[0]?.code).toBe("TOO_MANY_STREAMS");
    const first = await next();
    first.answer(result("c-1"));
    expect((await answers.next()).value!.id).toBe(1n);
    // One ended: the next call runs.
    requests.push(create(LinkRequestSchema, { id: 5000n, kind: { case: "call", value: call("Held") } }));
    for (let i = 1; i < MAX_LINK_CALLS; i++) await next();
    expect((await next()).req.call?.method).toBe("Held");
    requests.close();
  });
});
