import { create } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { actionError, Errors, farmError, invalidArgument } from "@farm/shared/errors";
import { ServeShellResponseSchema } from "@farm/shared/gen/farm/v1/agent_shell_service_pb";
import { OpenShellResponseSchema, type OpenShellResponse } from "@farm/shared/gen/farm/v1/shell_service_pb";
import type { AgentCallResult } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { type CallAgentRequest, CallAgentResponseSchema, CancelAgentCallResponseSchema, HoldsAgentResponseSchema, RelayShellResponseSchema, ReplicaService } from "@farm/shared/gen/farm/v1/replica_service_pb";
import type { AdbTunnelDeps } from "../adb-tunnels/adb-tunnel-service.js";
import { serveRelayAdbStream, serveRelayTunnel } from "../adb-tunnels/relayed-tunnel.js";
import type { LiveScreenDeps } from "../live-screen/live-screen-service.js";
import { serveRelayScreen } from "../live-screen/relayed-screen.js";
import type { LogcatServiceDeps } from "../live-logcat/logcat-service.js";
import { serveRelayLogcat } from "../live-logcat/relayed-logcat.js";
import type { Registry } from "../registry/registry.js";
import { AttachSession } from "../routing/agent-session.js";
import { awaitJoin, SHELL_JOIN_TIMEOUT_MS, type ShellRelay } from "../routing/shell-relay.js";
import { serveLink } from "./link-server.js";
import { RelayedCalls } from "./relayed-calls.js";

/** Output passed on in pieces no larger than this: well under ReplicaService's message cap. */
const RELAY_OUTPUT_CHUNK_BYTES = 64 * 1024;

/** ReplicaService: what another replica asks of this one. */
export function registerReplicaService(router: ConnectRouter, deps: { registry: Registry; relay: ShellRelay; screens: LiveScreenDeps; logcats: LogcatServiceDeps; tunnels: AdbTunnelDeps; relayed?: RelayedCalls }): void {
  const relayed = deps.relayed ?? new RelayedCalls();
  /** Runs a call another replica sends on an agent attached here. */
  const runHere = async (req: CallAgentRequest, signal: AbortSignal): Promise<AgentCallResult> => {
    const call = req.call;
    if (!call || call.method === "") throw invalidArgument("call", "a call is required");
    const attached = deps.registry.agentSession(req.agentId);
    // Only a stream this replica holds itself: a call is never passed on a second time.
    if (!attached || !(attached.session instanceof AttachSession)) {
      throw actionError(Errors.AGENT_OFFLINE, `agent ${req.agentId} is not attached to this coordinator replica`, { dispatched: false, ambiguous: false });
    }
    return attached.session.exchange(call.method, call.request, { tokenName: call.requestedBy, admin: call.requestedByAdmin }, Number(req.callerDeadlineMs), call.step, undefined, signal);
  };
  router.service(ReplicaService, {
    holdsAgent(req) {
      const attached = deps.registry.agentSession(req.agentId);
      const held = attached?.session instanceof AttachSession && !attached.session.signal.aborted;
      return create(HoldsAgentResponseSchema, { held });
    },

    async callAgent(req) {
      // The caller there going away reaches the agent as a cancel from here (CancelAgentCall), its answer still sent back.
      const running = relayed.begin(req.agentId, req.relayId);
      try {
        return create(CallAgentResponseSchema, { result: await runHere(req, running.signal) });
      } finally {
        running.end();
      }
    },

    link(requests, ctx) {
      return serveLink(requests, ctx.signal, runHere);
    },

    cancelAgentCall(req) {
      if (req.relayId === "") throw invalidArgument("relay_id", "a relay id is required");
      return create(CancelAgentCallResponseSchema, { running: relayed.cancel(req.agentId, req.relayId) });
    },

    async *relayShell(requests, ctx) {
      const it = requests[Symbol.asyncIterator]();
      const first = await it.next();
      if (first.done || first.value.kind.case !== "sessionId" || first.value.kind.value === "") throw invalidArgument("session_id", "the first message must be the session id");
      const sessionId = first.value.kind.value;
      if (deps.relay.has(sessionId)) throw farmError(Errors.ALREADY_EXISTS, "a shell session with this id is already open", "session_id");
      const pair = deps.relay.open(sessionId);
      const hangUp = () => {
        pair.toAgent.push(create(ServeShellResponseSchema, { kind: { case: "hangup", value: true } }));
        pair.toAgent.close();
      };
      // The other replica gone or cancelling: the session ends here too.
      const onAbort = () => pair.fail(farmError(Errors.COORDINATOR_UNAVAILABLE, "the replica relaying the caller's shell went away"));
      ctx.signal.addEventListener("abort", onAbort, { once: true });
      if (ctx.signal.aborted) onAbort();
      try {
        yield create(RelayShellResponseSchema, { kind: { case: "ready", value: true } });
        // Caller (through the other replica) -> agent, in the background; the stream ending hangs the session up.
        void (async () => {
          try {
            for (;;) {
              const m = await it.next();
              if (m.done) break;
              if (m.value.kind.case === "toAgent" && m.value.kind.value.kind.case !== undefined) pair.toAgent.push(m.value.kind.value);
            }
          } catch {
            /* the other replica gone */
          }
          hangUp();
        })();
        // The other replica asks the agent to start only now and waits for the join itself; this is a backstop.
        await awaitJoin(pair, 2 * SHELL_JOIN_TIMEOUT_MS);
        yield create(RelayShellResponseSchema, { kind: { case: "joined", value: true } });
        for await (const msg of pair.toCaller) {
          for (const piece of pieces(msg)) yield create(RelayShellResponseSchema, { kind: { case: "toCaller", value: piece } });
        }
      } finally {
        ctx.signal.removeEventListener("abort", onAbort);
        hangUp();
        pair.end();
      }
    },

    relayScreen(req, ctx) {
      return serveRelayScreen(deps.screens, req, ctx.signal);
    },

    relayLogcat(req, ctx) {
      return serveRelayLogcat(deps.logcats, req, ctx.signal);
    },

    relayTunnel(requests, ctx) {
      return serveRelayTunnel(deps.tunnels, requests, ctx.signal);
    },

    relayAdbStream(requests, ctx) {
      return serveRelayAdbStream(deps.tunnels, requests, ctx.signal);
    },
  });
}

/** A message for the caller, its output split so no relayed message nears the cap. */
function pieces(msg: OpenShellResponse): OpenShellResponse[] {
  if (msg.kind.case !== "output" || msg.kind.value.length <= RELAY_OUTPUT_CHUNK_BYTES) return [msg];
  const out: OpenShellResponse[] = [];
  for (let at = 0; at < msg.kind.value.length; at += RELAY_OUTPUT_CHUNK_BYTES) {
    out.push(create(OpenShellResponseSchema, { kind: { case: "output", value: msg.kind.value.subarray(at, at + RELAY_OUTPUT_CHUNK_BYTES) } }));
  }
  return out;
}
