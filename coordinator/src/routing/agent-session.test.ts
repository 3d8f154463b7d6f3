import { describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { toCommandError } from "@farm/shared/command-error";
import { actionError, Errors, toErrorReport } from "@farm/shared/errors";
import { AgentCallResultSchema, type AgentCall } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { AttachSession } from "./agent-session.js";

const by = { tokenName: "alice", admin: false };

/** The first call the coordinator sends to the agent on the session. */
async function sent(session: AttachSession): Promise<AgentCall> {
  for await (const msg of session.outgoing) if (msg.kind.case === "call") return msg.kind.value;
  throw new Error("the stream ended without a call");
}

/** Resolves once the caller's deadline has passed. */
function after(deadlineMs: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, deadlineMs - Date.now()) + 1));
}

function failure(p: Promise<unknown>): Promise<ConnectError> {
  return p.then(
    () => {
      throw new Error("the call did not fail");
    },
    (e: unknown) => ConnectError.from(e),
  );
}

describe("a call routed over an agent's stream", () => {
  it("hears the agent's answer that arrives after the caller's deadline, with its action id", async () => {
    const session = new AttachSession("agent-token");
    const deadline = Date.now() + 200;
    const answer = failure(session.call(DeviceService.method.setProperty, { target: { serial: "S1" }, key: "persist.x", value: "1" }, by, deadline));
    const call = await sent(session);
    await after(deadline);
    const raised = actionError(Errors.COMMAND_TIMEOUT, "setprop did not finish by its deadline", { dispatched: null, ambiguous: true, actionId: "act-late", agentId: "agent-1" });
    session.resolve(create(AgentCallResultSchema, { commandId: call.commandId, error: toCommandError(toErrorReport(raised), raised) }));
    expect(toErrorReport(await answer)).toMatchObject({ code: "COMMAND_TIMEOUT", dispatched: null, ambiguous: true, actionId: "act-late", agentId: "agent-1" });
  });

  it("tells the agent when the caller goes away, and still hears the agent's answer; a caller done or out of time sends no cancel", async () => {
    const session = new AttachSession("agent-token");
    const iterator = session.outgoing[Symbol.asyncIterator]();
    const next = async () => (await iterator.next()).value as { kind: { case: string; value: { commandId: string } } };
    const gone = new AbortController();
    const answer = failure(session.call(DeviceService.method.setProperty, { target: { serial: "S1" }, key: "persist.x", value: "1" }, by, Date.now() + 60_000, { cancelled: gone.signal }));
    const call = await next();
    expect(call.kind.case).toBe("call");
    gone.abort();
    const cancel = await next();
    expect(cancel.kind).toEqual({ case: "cancel", value: expect.objectContaining({ commandId: call.kind.value.commandId }) });
    const raised = actionError(Errors.CALL_CANCELLED, "cancelled before it reached S1", { dispatched: false, ambiguous: false });
    session.resolve(create(AgentCallResultSchema, { commandId: call.kind.value.commandId, error: toCommandError(toErrorReport(raised), raised) }));
    expect(toErrorReport(await answer)).toMatchObject({ code: "CALL_CANCELLED", dispatched: false, ambiguous: false });

    // Answered first: the caller's signal ending with the call cancels nothing.
    const done = new AbortController();
    const read = session.call(DeviceService.method.getOwnership, { target: { serial: "S1" } }, by, Date.now() + 60_000, { cancelled: done.signal });
    const second = await next();
    session.resolve(create(AgentCallResultSchema, { commandId: second.kind.value.commandId }));
    await read;
    done.abort();
    // Out of time: the agent has an earlier deadline of its own and answers by it.
    const late = new AbortController();
    const third = failure(session.call(DeviceService.method.getOwnership, { target: { serial: "S1" } }, by, Date.now() + 60_000, { cancelled: late.signal }));
    const thirdCall = await next();
    late.abort(new ConnectError("deadline", Code.DeadlineExceeded));
    session.resolve(create(AgentCallResultSchema, { commandId: thirdCall.kind.value.commandId, error: toCommandError(toErrorReport(raised), raised) }));
    await third;
    // Nothing was sent after the three calls.
    session.end();
    expect((await iterator.next()).done).toBe(true);
  });

  it("when the agent never answers a device change, says the outcome is unknown and where the agent's journal shows it", async () => {
    const session = new AttachSession("agent-token");
    const deadline = Date.now() + 200;
    let settled = false;
    const answer = failure(session.call(DeviceService.method.setProperty, { target: { serial: "S1" }, key: "persist.x", value: "1" }, by, deadline)).finally(() => (settled = true));
    await sent(session);
    await after(deadline);
    // Still listening past the deadline: the agent's answer may be on its way.
    expect(settled).toBe(false);
    const report = toErrorReport(await answer);
    expect(report).toMatchObject({ code: "COMMAND_TIMEOUT", dispatched: null, ambiguous: true });
    expect(report.message).toContain("farm device ownership status --device S1");
  });

  it("when the agent never answers a read, has no action to point at", async () => {
    const session = new AttachSession("agent-token");
    const answer = failure(session.call(DeviceService.method.getOwnership, { target: { serial: "S1" } }, by, Date.now() + 100));
    await sent(session);
    const report = toErrorReport(await answer);
    expect(report.code).toBe("COMMAND_TIMEOUT");
    expect(report.message).not.toContain("ownership status");
  });
});
