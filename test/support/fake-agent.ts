import { connect } from "node:net";
import { create, fromBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AsyncQueue } from "@farm/shared/async-queue";
import { PROTOCOL_VERSION } from "@farm/shared/version";
import { AgentService, AttachRequestSchema, DeviceReportSchema, type AgentCall, type AttachRequest } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { AgentControlService, EndLeaseRequestSchema } from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import { methodPath } from "@farm/shared/method-rules";

export type DeviceReportInit = MessageInitShape<typeof DeviceReportSchema>;

export const bearer = (token: string): Interceptor => (next) => (req) => {
  req.header.set("authorization", `Bearer ${token}`);
  return next(req);
};

/** `count` plausible phones for lightweight agent number `agent`. */
export function fakeDevices(agent: number, count: number): DeviceReportInit[] {
  return Array.from({ length: count }, (_, d) => ({
    serial: `bench-${agent}-${d}`,
    state: "device",
    properties: {
      model: "Pixel 7",
      manufacturer: "Google",
      apiLevel: 34,
      androidVersion: "14",
      abi: "arm64-v8a",
      serialno: `SN${agent}X${d}`,
      bootId: "00000000-0000-4000-8000-000000000000",
      physicalId: `pd-bench-${agent}-${d}`,
      identityStatus: "ok",
    },
  }));
}

export interface FakeAgent {
  /** Reports one device as changed (state, properties), as a real agent does when adb tells it. */
  change(report: DeviceReportInit): void;
  /** The lease ids of every EndLease a coordinator sent, in order of arrival. */
  endedLeases: string[];
}

const END_LEASE = methodPath(AgentControlService.method.endLease);

/**
 * A lightweight agent for load tests: its own HTTP/2 connection and control
 * stream, a fixed inventory and heartbeats with a random phase, no adb. It
 * answers EndLease as a real agent with no tunnel open does (nothing to
 * settle) and records it (`endedLeases`, `onEndLease`); other calls get no
 * answer.
 */
export async function attachFakeAgent(opts: {
  url: string;
  token: string;
  index: number;
  devices: DeviceReportInit[];
  heartbeatMs: number;
  signal: AbortSignal;
  localAddress?: string;
  onEndLease?: (leaseId: string) => void;
}): Promise<FakeAgent> {
  const { index: i, signal: stop } = opts;
  const transport = createGrpcTransport({
    baseUrl: opts.url,
    interceptors: [bearer(opts.token)],
    // A source address of our choosing stands in for another machine (127.0.0.2).
    ...(opts.localAddress
      ? { nodeOptions: { createConnection: (u: URL) => connect({ host: u.hostname, port: Number(u.port), localAddress: opts.localAddress }) } }
      : {}),
  });
  const out = new AsyncQueue<AttachRequest>();
  out.push(
    create(AttachRequestSchema, {
      kind: {
        case: "hello",
        value: {
          agentId: `bench-agent-${i}`,
          name: `bench-${String(i).padStart(4, "0")}`,
          hostname: `lab-${i}`,
          protocolVersion: PROTOCOL_VERSION,
          agentVersion: "bench",
          heartbeatIntervalMs: opts.heartbeatMs,
        },
      },
    }),
  );
  const it = createClient(AgentService, transport).attach(out, { signal: stop })[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done || first.value.kind.case !== "helloAccepted") throw new Error(`agent ${i} not accepted`);
  out.push(create(AttachRequestSchema, { kind: { case: "inventory", value: { devices: opts.devices } } }));
  // Random phase so heartbeats spread over the interval as real agents' do.
  let seq = 0n;
  const beat = () => out.push(create(AttachRequestSchema, { kind: { case: "heartbeat", value: { sequence: ++seq } } }));
  const phase = setTimeout(() => {
    beat();
    const t = setInterval(beat, opts.heartbeatMs);
    stop.addEventListener("abort", () => clearInterval(t), { once: true });
  }, Math.random() * opts.heartbeatMs);
  stop.addEventListener(
    "abort",
    () => {
      clearTimeout(phase);
      out.close();
    },
    { once: true },
  );
  const endedLeases: string[] = [];
  const answer = (call: AgentCall) => {
    if (call.method !== END_LEASE) return;
    const leaseId = fromBinary(EndLeaseRequestSchema, call.request).leaseId;
    endedLeases.push(leaseId);
    opts.onEndLease?.(leaseId);
    // An empty EndLeaseResponse: no raw-adb action to settle.
    out.push(create(AttachRequestSchema, { kind: { case: "callResult", value: { commandId: call.commandId } } }));
  };
  void (async () => {
    try {
      for (;;) {
        const next = await it.next();
        if (next.done) break;
        if (next.value.kind.case === "call") answer(next.value.kind.value);
      }
    } catch {
      /* stream ends at shutdown */
    }
  })();
  return {
    endedLeases,
    change(report) {
      out.push(create(AttachRequestSchema, { kind: { case: "deviceChange", value: { kind: { case: "upsert", value: report } } } }));
    },
  };
}
