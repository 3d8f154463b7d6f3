import { create } from "@bufbuild/protobuf";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import { RelayAdbStreamResponseSchema, RelayTunnelResponseSchema, type RelayAdbStreamRequest, type RelayAdbStreamResponse, type RelayTunnelRequest, type RelayTunnelResponse } from "@farm/shared/gen/farm/v1/replica_service_pb";
import { relayedRoute } from "../replicas/relayed-route.js";
import { adbStream, holdTunnel, type AdbTunnelDeps } from "./adb-tunnel-service.js";

/**
 * ReplicaService.RelayTunnel, on the replica holding the agent: checks the
 * route and the lease again, opens the tunnel on the agent under the
 * caller's tunnel id, and holds it until the other replica closes it (its
 * reason goes to the agent's journal) or goes away, the lease ends, or the
 * agent goes; then stops it on the agent. The other replica records it.
 */
export async function* serveRelayTunnel(deps: AdbTunnelDeps, requests: AsyncIterable<RelayTunnelRequest>, signal: AbortSignal): AsyncGenerator<RelayTunnelResponse> {
  const it = requests[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done || first.value.kind.case !== "start") throw invalidArgument("start", "the first message must be start");
  const start = first.value.kind.value;
  if (!start.tunnelId) throw invalidArgument("start.tunnel_id", "a tunnel id is required");
  if (!start.requestedBy) throw invalidArgument("start.requested_by", "the caller is required");
  if (!start.leaseId) throw invalidArgument("start.lease_id", "a remote adb tunnel needs the phone's lease");
  const { route } = await relayedRoute(deps, { agentId: start.agentId, serial: start.serial, physicalId: start.physicalId, leaseId: start.leaseId });
  const closing = new AbortController();
  let asked = false;
  // The other replica's word (or its requests ending) closes the tunnel, quietly: it knows why.
  void (async () => {
    try {
      for (;;) {
        const m = await it.next();
        if (m.done) break;
        if (m.value.kind.case === "closeReason") {
          asked = true;
          closing.abort(farmError(Errors.TUNNEL_CLOSED, m.value.kind.value || "closed"));
          return;
        }
      }
      asked = true;
      closing.abort(farmError(Errors.TUNNEL_CLOSED, "closed"));
    } catch {
      closing.abort(farmError(Errors.TUNNEL_CLOSED, "the coordinator replica relaying the tunnel went away"));
    }
  })();
  const onGone = () => closing.abort(farmError(Errors.TUNNEL_CLOSED, "the coordinator replica relaying the tunnel went away"));
  signal.addEventListener("abort", onGone, { once: true });
  if (signal.aborted) onGone();
  try {
    const tunnel = holdTunnel(deps, { tokenName: start.requestedBy, admin: false }, { ...route, leaseId: start.leaseId }, { signal: closing.signal, quiet: () => asked || signal.aborted, tunnelId: start.tunnelId, record: false });
    for await (const m of tunnel) if ("opened" in m) yield create(RelayTunnelResponseSchema, { kind: { case: "actionId", value: m.opened.actionId } });
  } finally {
    signal.removeEventListener("abort", onGone);
  }
}

/**
 * ReplicaService.RelayAdbStream, on the replica holding the agent: one adb
 * stream of a tunnel RelayTunnel holds here, for its owner only. Each side
 * waits for the other (bounded queues both ways, HTTP/2 flow control on the
 * link); the other replica's end or loss cuts it on the agent.
 */
export async function* serveRelayAdbStream(deps: AdbTunnelDeps, requests: AsyncIterable<RelayAdbStreamRequest>, signal: AbortSignal): AsyncGenerator<RelayAdbStreamResponse> {
  const it = requests[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done || first.value.kind.case !== "start") throw invalidArgument("start", "the first message must be start");
  const start = first.value.kind.value;
  if (!start.requestedBy) throw invalidArgument("start.requested_by", "the caller is required");
  const incoming: AsyncIterator<Uint8Array | undefined> = {
    next: async () => {
      const m = await it.next();
      return m.done ? { done: true, value: undefined } : { done: false, value: m.value.kind.case === "data" ? m.value.kind.value : undefined };
    },
  };
  for await (const m of adbStream(deps, { tokenName: start.requestedBy, admin: false }, start, incoming, signal)) {
    if ("opened" in m) yield create(RelayAdbStreamResponseSchema, { kind: { case: "opened", value: true } });
    else if ("end" in m) yield create(RelayAdbStreamResponseSchema, { kind: { case: "end", value: true } });
    else yield create(RelayAdbStreamResponseSchema, { kind: { case: "data", value: m.data } });
  }
}
