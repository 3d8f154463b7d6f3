import { connect } from "node:net";
import { create, fromBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AsyncQueue } from "@farm/shared/async-queue";
import { Backoff } from "@farm/shared/backoff";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
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

/** Why a coordinator ended a fake agent's control stream, as the agent saw it. */
export interface AgentDrop {
  /** The error code the coordinator sent (AGENT_HEARTBEAT_MISSED, …), or "" (the stream closed, or no code). */
  code: string;
  message: string;
  /** How long before the drop this agent last sent a heartbeat (ms): small means it was sent and not read in time. */
  sinceLastBeatMs: number;
}

const END_LEASE = methodPath(AgentControlService.method.endLease);

/**
 * A lightweight agent for load tests: its own HTTP/2 connection and control
 * stream, a fixed inventory and heartbeats with a random phase, no adb. It
 * answers EndLease as a real agent with no tunnel open does (nothing to
 * settle) and records it (`endedLeases`, `onEndLease`); other calls get no
 * answer. With `reconnect`, a stream the coordinator ends is attached again
 * as a real agent's uplink does (agent/src/uplink/uplink.ts): after an
 * exponential backoff with full jitter, with the same token and identity,
 * sending its whole inventory again; `onDrop` hears why it was dropped.
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
  reconnect?: { initialMs: number; maxMs: number; onDrop?: (drop: AgentDrop) => void; onAttached?: () => void };
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
  const endedLeases: string[] = [];
  let out = new AsyncQueue<AttachRequest>();
  let lastBeatAt = 0;

  /** One control stream: resolves with its reader once the coordinator accepted the hello. */
  const attach = async () => {
    const queue = new AsyncQueue<AttachRequest>();
    queue.push(
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
    const ended = new AbortController();
    const onStop = () => ended.abort();
    stop.addEventListener("abort", onStop, { once: true });
    const it = createClient(AgentService, transport).attach(queue, { signal: ended.signal })[Symbol.asyncIterator]();
    const cleanup = () => {
      stop.removeEventListener("abort", onStop);
      queue.close();
    };
    try {
      const first = await it.next();
      if (first.done || first.value.kind.case !== "helloAccepted") throw new Error(`agent ${i} not accepted`);
    } catch (err) {
      cleanup();
      ended.abort();
      throw err;
    }
    out = queue;
    queue.push(create(AttachRequestSchema, { kind: { case: "inventory", value: { devices: opts.devices } } }));
    lastBeatAt = Date.now();
    // Random phase so heartbeats spread over the interval as real agents' do.
    let seq = 0n;
    const beat = () => {
      lastBeatAt = Date.now();
      queue.push(create(AttachRequestSchema, { kind: { case: "heartbeat", value: { sequence: ++seq } } }));
    };
    let interval: NodeJS.Timeout | undefined;
    const phase = setTimeout(() => {
      beat();
      interval = setInterval(beat, opts.heartbeatMs);
    }, Math.random() * opts.heartbeatMs);
    /** Reads the stream until it ends; resolves with why (undefined: stopped by us). */
    const run = async (): Promise<AgentDrop | undefined> => {
      let drop: AgentDrop | undefined;
      try {
        for (;;) {
          const next = await it.next();
          if (next.done) {
            drop = { code: "", message: "the coordinator closed the control stream", sinceLastBeatMs: Date.now() - lastBeatAt };
            break;
          }
          if (next.value.kind.case === "call") answer(next.value.kind.value, queue);
        }
      } catch (err) {
        const ce = ConnectError.from(err);
        drop = { code: ce.findDetails(ErrorDetailSchema)[0]?.code ?? Code[ce.code] ?? "", message: ce.rawMessage, sinceLastBeatMs: Date.now() - lastBeatAt };
      } finally {
        clearTimeout(phase);
        clearInterval(interval);
        cleanup();
      }
      return stop.aborted ? undefined : drop;
    };
    return run;
  };

  const answer = (call: AgentCall, to: AsyncQueue<AttachRequest>) => {
    if (call.method !== END_LEASE) return;
    const leaseId = fromBinary(EndLeaseRequestSchema, call.request).leaseId;
    endedLeases.push(leaseId);
    opts.onEndLease?.(leaseId);
    // An empty EndLeaseResponse: no raw-adb action to settle.
    to.push(create(AttachRequestSchema, { kind: { case: "callResult", value: { commandId: call.commandId } } }));
  };

  const firstRun = await attach();
  void (async () => {
    let run: (() => Promise<AgentDrop | undefined>) | undefined = firstRun;
    const backoff = opts.reconnect && new Backoff(opts.reconnect);
    while (!stop.aborted) {
      if (run) {
        const drop = await run();
        run = undefined;
        if (!drop || !backoff) break;
        opts.reconnect?.onDrop?.(drop);
      }
      // Waits as the real uplink does, then attaches again (its backoff reset once accepted).
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, backoff!.next());
        stop.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
      });
      if (stop.aborted) break;
      try {
        run = await attach();
        backoff!.reset();
        opts.reconnect?.onAttached?.();
      } catch {
        /* refused or unreachable: the next attempt after a longer wait */
      }
    }
  })().catch(() => undefined);
  return {
    endedLeases,
    change(report) {
      out.push(create(AttachRequestSchema, { kind: { case: "deviceChange", value: { kind: { case: "upsert", value: report } } } }));
    },
  };
}
