/**
 * A routed call end to end, without the network: the coordinator's
 * AttachSession encodes the call, the agent's dispatcher runs it through its
 * in-process router and the method rules, the answer returns as bytes, and
 * the coordinator's re-raised error reaches a client through a real Connect
 * call. What the stream adds (framing, reconnects) is covered by the e2e
 * suites; this pins down what each hop keeps.
 */
import { describe, expect, it } from "vitest";
import { create, toBinary, type DescMessage, type DescMethodUnary, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient, createRouterTransport, type ServiceImpl } from "@connectrpc/connect";
import { actionError, Errors, farmError, toErrorReport, type ActionOutcome, type FarmErrorSpec } from "@farm/shared/errors";
import { createLogger } from "@farm/shared/log";
import { methodPath } from "@farm/shared/method-rules";
import { AgentCallSchema, type AgentCall } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { DeviceService, GetOwnershipRequestSchema } from "@farm/shared/gen/farm/v1/device_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { callDispatcher, type CallDispatcher } from "@farm/agent/rpc/call-dispatch";
import type { ServiceRoute } from "@farm/agent/rpc/routes";
import { callContext, type CallContext } from "@farm/agent/rpc/call-context";
import { AttachSession } from "@farm/coordinator/routing/agent-session";

const by = { tokenName: "alice", admin: false };

function agent(impl: Partial<ServiceImpl<typeof DeviceService>>, opts: { draining?: string; logs?: string[] } = {}): CallDispatcher {
  return callDispatcher({
    routes: [{ service: DeviceService, impl } as unknown as ServiceRoute],
    drainReason: () => opts.draining ?? "",
    log: createLogger({ level: "debug", write: (line) => opts.logs?.push(line) }),
    hostPaths: ["/var/lib/farm-secret-host-dir"],
  });
}

/** The coordinator's side of one call, with the agent answering on the other end of the stream. */
async function routed<I extends DescMessage, O extends DescMessage>(dispatch: CallDispatcher, method: DescMethodUnary<I, O>, req: MessageInitShape<I>, deadlineMs = Date.now() + 10_000): Promise<MessageShape<O>> {
  const session = new AttachSession("agent-token");
  const answer = session.call(method, req, by, deadlineMs);
  for await (const msg of session.outgoing) {
    if (msg.kind.case !== "call") continue;
    session.resolve(await dispatch(msg.kind.value));
    break;
  }
  return answer;
}

/** The error a client of the coordinator sees when the routed call fails. */
async function clientSees(dispatch: CallDispatcher, method: DescMethodUnary, req: object): Promise<ConnectError> {
  const transport = createRouterTransport(({ service }) => {
    service(RegistryService, {
      async listAgents() {
        await routed(dispatch, method, req as never);
        throw new Error("the routed call did not fail");
      },
    });
  });
  return createClient(RegistryService, transport).listAgents({}).then(
    () => {
      throw new Error("no error");
    },
    (err: unknown) => ConnectError.from(err),
  );
}

const entries = Object.entries(Errors) as [string, FarmErrorSpec][];
const outcomes: [string, ActionOutcome | undefined][] = [
  ["no outcome", undefined],
  ["not dispatched", { dispatched: false, ambiguous: false, actionId: "act-1", agentId: "agent-1" }],
  ["dispatched", { dispatched: true, ambiguous: false, actionId: "act-2", agentId: "agent-2" }],
  ["ambiguous", { dispatched: null, ambiguous: true, actionId: "act-3", agentId: "agent-3" }],
];

describe("a routed call", () => {
  it.each(entries)("keeps %s's code, status, field and outcome from the agent's service to the client", async (_key, spec) => {
    for (const [, outcome] of outcomes) {
      const raised = outcome ? actionError(spec, `failed: ${spec.code}`, outcome, "target.serial") : farmError(spec, `failed: ${spec.code}`, "target.serial");
      const got = await clientSees(agent({ getOwnership: () => Promise.reject(raised) }), DeviceService.method.getOwnership, { target: { serial: "S1" } });
      expect(got.code).toBe(spec.status);
      const report = toErrorReport(got);
      expect(report).toMatchObject({ code: spec.code, field: "target.serial", message: `failed: ${spec.code}` });
      if (outcome) expect(report).toMatchObject({ dispatched: outcome.dispatched, ambiguous: outcome.ambiguous, actionId: outcome.actionId, agentId: outcome.agentId });
      else expect(report.dispatched).toBeUndefined();
    }
  });

  it("returns the agent's answer, decoded as the method's output", async () => {
    const res = await routed(agent({ getOwnership: (req) => ({ ownership: { serial: req.target?.serial ?? "", physicalId: "pd-1", locked: true } }) }), DeviceService.method.getOwnership, { target: { serial: "S1" } });
    expect(res.ownership).toMatchObject({ serial: "S1", physicalId: "pd-1", locked: true });
  });

  it("gives the agent's service the caller and a deadline shorter than the caller's", async () => {
    let seen: CallContext | undefined;
    const callerDeadline = Date.now() + 20_000;
    await routed(agent({ getOwnership: (_req, ctx) => ((seen = callContext(ctx)), {}) }), DeviceService.method.getOwnership, { target: { serial: "S1" } }, callerDeadline);
    expect(seen).toMatchObject({ requestedBy: "alice", admin: false });
    expect(seen?.commandId).toMatch(/^[0-9a-f-]{36}$/);
    expect(seen?.deadlineMs).toBeLessThan(callerDeadline);
    expect(seen?.deadlineMs).toBeGreaterThan(Date.now());
  });

  it("on a draining agent, refuses a device change before it runs and lets reads through", async () => {
    let ran = 0;
    const dispatch = agent({ runShell: () => (ran++, {}), getOwnership: () => (ran++, {}) }, { draining: "kernel upgrade" });
    const refused = toErrorReport(await clientSees(dispatch, DeviceService.method.runShell, { target: { serial: "S1" }, command: "true" }));
    expect(refused).toMatchObject({ code: Errors.AGENT_DRAINING.code, dispatched: false, ambiguous: false });
    expect(refused.message).toContain("kernel upgrade");
    expect(ran).toBe(0);
    await routed(dispatch, DeviceService.method.getOwnership, { target: { serial: "S1" } });
    expect(ran).toBe(1);
  });

  it("says a device change that failed before reaching the device was not dispatched", async () => {
    const got = await clientSees(agent({ runShell: () => Promise.reject(farmError(Errors.INVALID_ARGUMENT, "bad", "command")) }), DeviceService.method.runShell, { target: { serial: "S1" } });
    expect(toErrorReport(got)).toMatchObject({ code: "INVALID_ARGUMENT", field: "command", dispatched: false, ambiguous: false });
    const read = await clientSees(agent({ getOwnership: () => Promise.reject(farmError(Errors.INVALID_ARGUMENT, "bad", "target.serial")) }), DeviceService.method.getOwnership, {});
    expect(toErrorReport(read).dispatched).toBeUndefined();
  });

  it("logs a failure of the host with its cause and keeps host paths out of the answer", async () => {
    const logs: string[] = [];
    const eio = Object.assign(new Error("EIO: i/o error, write '/var/lib/farm-secret-host-dir/journal.db'"), { code: "EIO" });
    const got = await clientSees(agent({ getOwnership: () => Promise.reject(eio) }, { logs }), DeviceService.method.getOwnership, { target: { serial: "S1" } });
    expect(got.rawMessage).not.toContain("farm-secret-host-dir");
    expect(toErrorReport(got).code).toBe(Errors.INTERNAL.code);
    expect(logs.some((l) => l.includes("\"level\":\"error\"") && l.includes("command failed on this host") && l.includes("getOwnership"))).toBe(true);
  });

  it("answers a method the agent does not serve, or a request that does not decode, with a clear error", async () => {
    const dispatch = agent({});
    const call = (init: MessageInitShape<typeof AgentCallSchema>): AgentCall => create(AgentCallSchema, { commandId: "c-1", deadline: timestampFromMs(Date.now() + 5_000), ...init });
    const unknown = await dispatch(call({ method: "farm.v1.DeviceService/Teleport", request: toBinary(GetOwnershipRequestSchema, create(GetOwnershipRequestSchema)) }));
    expect(unknown).toMatchObject({ commandId: "c-1", error: { detail: { code: Errors.NOT_IMPLEMENTED.code }, status: Code.Unimplemented } });
    const unimplemented = await dispatch(call({ method: methodPath(DeviceService.method.reboot), request: new Uint8Array() }));
    expect(unimplemented.error?.status).toBe(Code.Unimplemented);
    const garbage = await agent({ getOwnership: () => ({}) })(call({ method: methodPath(DeviceService.method.getOwnership), request: new Uint8Array([0xff, 0xff, 0xff]) }));
    expect(garbage.error?.detail?.code).toBe(Errors.AGENT_PROTOCOL_VIOLATION.code);
  });
});
