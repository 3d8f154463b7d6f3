import { create } from "@bufbuild/protobuf";
import { toErrorReport } from "@farm/shared/errors";
import { AgentHelloSchema, DeviceReportSchema, type AgentHello, type DeviceReport } from "@farm/shared/gen/farm/v1/agent_service_pb";
import type { AgentSession } from "../registry.js";

/** An agent's control stream as registry tests need it: it is never ended by them. */
export const testSession = (): AgentSession => ({ terminate: () => undefined });

/** An agent's hello: id and name, the rest plausible. */
export const testHello = (id: string, name: string): AgentHello => create(AgentHelloSchema, { agentId: id, name, hostname: "h", agentVersion: "t", protocolVersion: 2, heartbeatIntervalMs: 1000 });

/** An online phone on `serial` whose identity the agent has read. */
export const phoneReport = (serial: string, physicalId: string, extra: { unresolved?: string[]; model?: string } = {}): DeviceReport =>
  create(DeviceReportSchema, {
    serial,
    state: "device",
    properties: { model: extra.model ?? "Pixel 7", apiLevel: 34, serialno: "SN", physicalId, identityStatus: "ok", unresolvedActionIds: extra.unresolved ?? [] },
  });

/** A serial as an agent lists it before it has read the phone's identity (adb's state only). */
export const bareReport = (serial: string, state = "device"): DeviceReport => create(DeviceReportSchema, { serial, state });

/** The error a call throws, as clients see it. */
export function failure(fn: () => unknown): ReturnType<typeof toErrorReport> {
  try {
    fn();
  } catch (err) {
    return toErrorReport(err);
  }
  throw new Error("expected the call to fail");
}

/** The error a change is refused with, as clients see it. */
export async function refusal(p: Promise<unknown>): Promise<ReturnType<typeof toErrorReport>> {
  try {
    await p;
  } catch (err) {
    return toErrorReport(err);
  }
  throw new Error("expected the change to be refused");
}
