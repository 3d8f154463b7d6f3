import { create } from "@bufbuild/protobuf";
import { createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AsyncQueue } from "@farm/shared/async-queue";
import { createLogger } from "@farm/shared/log";
import { PROTOCOL_VERSION } from "@farm/shared/version";
import { AgentService, AttachRequestSchema, type AttachRequest } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { callDispatcher } from "@farm/agent/rpc/call-dispatch";
import type { ServiceRoute } from "@farm/agent/rpc/routes";

/** A gRPC transport to a coordinator that presents a token (and a lease token) on every call. */
export function tokenTransport(baseUrl: string, token: string, leaseToken?: string): Transport {
  const bearer: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    if (leaseToken) req.header.set("x-farm-lease", leaseToken);
    return next(req);
  };
  return createGrpcTransport({ baseUrl, interceptors: [bearer] });
}

/** A phone the agent reports: its adb state (default "device"); its physical id is `pd-SERIAL`. */
export interface ReportedPhone {
  serial: string;
  state?: string;
}

/**
 * Attaches an agent to a real coordinator from inside the test: it reports
 * `phones` and answers every routed call through the agent's own dispatcher
 * (call-dispatch.ts, with the method rules) over `routes`, so what the
 * coordinator does is real and the device side is what the test supplies.
 * Resolves once the coordinator has accepted it; it runs until `signal`.
 * `report` sends a new inventory, as an agent does when a phone's state changes.
 */
export async function attachInProcessAgent(opts: { baseUrl: string; agentToken: string; agentId: string; routes: ServiceRoute[]; phones: ReportedPhone[]; signal: AbortSignal }): Promise<{ report(phones: ReportedPhone[]): void }> {
  const dispatch = callDispatcher({ routes: opts.routes, drainReason: () => "", log: createLogger({ level: "error" }), hostPaths: [] });
  const out = new AsyncQueue<AttachRequest>();
  const hello = { agentId: opts.agentId, name: opts.agentId, hostname: "h", protocolVersion: PROTOCOL_VERSION, agentVersion: "t", heartbeatIntervalMs: 60_000 };
  out.push(create(AttachRequestSchema, { kind: { case: "hello", value: hello } }));
  const it = createClient(AgentService, tokenTransport(opts.baseUrl, opts.agentToken)).attach(out, { signal: opts.signal })[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done || first.value.kind.case !== "helloAccepted") throw new Error("agent not accepted");
  const inventory = (phones: ReportedPhone[]) => phones.map(({ serial, state }) => ({
    serial,
    state: state ?? "device",
    properties: { model: "Pixel 7", manufacturer: "Google", apiLevel: 34, androidVersion: "14", abi: "arm64-v8a", serialno: serial, bootId: "00000000-0000-4000-8000-000000000000", physicalId: `pd-${serial}`, identityStatus: "ok" },
  }));
  const report = (phones: ReportedPhone[]) => out.push(create(AttachRequestSchema, { kind: { case: "inventory", value: { devices: inventory(phones) } } }));
  report(opts.phones);
  void (async () => {
    try {
      for (;;) {
        const r = await it.next();
        if (r.done) return;
        if (r.value.kind.case !== "call") continue;
        out.push(create(AttachRequestSchema, { kind: { case: "callResult", value: await dispatch(r.value.kind.value) } }));
      }
    } catch {
      // The stream ends with the test.
    }
  })();
  return { report };
}
