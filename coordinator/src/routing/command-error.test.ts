import { describe, expect, it } from "vitest";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { toCommandError } from "@farm/shared/command-error";
import { actionError, Errors, farmError, toErrorReport, type ActionOutcome, type FarmErrorSpec } from "@farm/shared/errors";
import { CommandErrorSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { fromCommandError } from "./command-error.js";

/**
 * Agent raises → CommandError over the control stream (as bytes) →
 * coordinator re-raises → a real Connect call → the client's report.
 */
async function roundTrip(raised: ConnectError, opts: { dropStatus?: boolean } = {}): Promise<ConnectError> {
  const onAgent = toCommandError(toErrorReport(raised), raised);
  const wire = fromBinary(CommandErrorSchema, toBinary(CommandErrorSchema, onAgent));
  if (opts.dropStatus) wire.status = 0; // an agent from before the status field
  const transport = createRouterTransport(({ service }) => {
    service(RegistryService, {
      listAgents() {
        throw fromCommandError(wire);
      },
    });
  });
  try {
    await createClient(RegistryService, transport).listAgents({});
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("the call did not fail");
}

const entries = Object.entries(Errors) as [string, FarmErrorSpec][];
const outcomes: [string, ActionOutcome | undefined][] = [
  ["no outcome", undefined],
  ["not dispatched", { dispatched: false, ambiguous: false, actionId: "act-1", agentId: "agent-1" }],
  ["dispatched", { dispatched: true, ambiguous: false, actionId: "act-2", agentId: "agent-2" }],
  ["ambiguous", { dispatched: null, ambiguous: true, actionId: "act-3", agentId: "agent-3" }],
];

describe("the error table", () => {
  it("names each entry by its own code", () => {
    for (const [key, spec] of entries) expect(spec.code).toBe(key);
  });

  it.each(entries)("%s keeps code, status, field and outcome from agent to client", async (_key, spec) => {
    for (const [, outcome] of outcomes) {
      const raised = outcome ? actionError(spec, `failed: ${spec.code}`, outcome, "target.serial") : farmError(spec, `failed: ${spec.code}`, "target.serial");
      const got = await roundTrip(raised);
      expect(got.code).toBe(spec.status);
      const report = toErrorReport(got);
      expect(report).toEqual({
        ok: false,
        code: spec.code,
        message: `failed: ${spec.code}`,
        field: "target.serial",
        ...(outcome
          ? { dispatched: outcome.dispatched, ambiguous: outcome.ambiguous, actionId: outcome.actionId, agentId: outcome.agentId }
          : {}),
      });
    }
  });

  it.each(entries)("%s gets its table status from an agent that sends none", async (_key, spec) => {
    const got = await roundTrip(farmError(spec, "older agent"), { dropStatus: true });
    expect(got.code).toBe(spec.status);
    expect(toErrorReport(got).code).toBe(spec.code);
  });

  it("passes a code this build does not know through, with the agent's status", async () => {
    const newer = fromBinary(CommandErrorSchema, toBinary(CommandErrorSchema, toCommandError({ ok: false, code: Errors.INTERNAL.code, message: "x" }, new ConnectError("x", Code.Aborted))));
    newer.detail!.code = "SOMETHING_NEWER";
    const err = ConnectError.from(fromCommandError(newer));
    expect(err.code).toBe(Code.Aborted);
    expect(toErrorReport(err).code).toBe("SOMETHING_NEWER");
  });
});
