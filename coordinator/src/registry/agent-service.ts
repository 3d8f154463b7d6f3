import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { Errors, farmError, invalidArgument, toErrorReport } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import { FARM_VERSION, MIN_AGENT_PROTOCOL, PROTOCOL_VERSION } from "@farm/shared/version";
import { AgentService, AttachResponseSchema, type AgentHello, type AttachRequest } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { requirePrincipal } from "../auth/auth.js";
import { peerKey } from "../http/peer.js";
import { AttachSession } from "../routing/agent-session.js";
import type { Registry } from "./registry.js";
import type { TokenStore } from "../auth/token-store.js";
import { isRevocation, TOKEN_REVOKED } from "../auth/open-calls.js";
import { stageTrace } from "@farm/shared/stage-trace";

export interface AgentServiceDeps {
  registry: Registry;
  tokens: TokenStore;
  log: Logger;
  /** How long a new stream may take to say hello. */
  helloTimeoutMs: number;
}

const idPattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function registerAgentService(router: ConnectRouter, deps: AgentServiceDeps): void {
  router.service(AgentService, {
    async *attach(requests, ctx) {
      const principal = requirePrincipal(ctx);
      const it = requests[Symbol.asyncIterator]();
      const first = await nextWithin(it, deps.helloTimeoutMs, ctx.signal);
      if (first === undefined || first.kind.case !== "hello") {
        throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, "the first message on an agent stream must be a hello");
      }
      const hello = first.kind.value;
      validateHello(hello);
      await bindIdentity(deps, principal.tokenName, hello);
      // Attached through another replica, and that replica still has the stream open: a copy of the agent, refused as one coordinator refuses it.
      const held = deps.registry.agentSession(hello.agentId)?.session;
      if (held?.stillHeld && (await held.stillHeld())) {
        throw farmError(Errors.AGENT_ALREADY_ATTACHED, `agent ${hello.agentId} (${hello.name}) is already attached through another coordinator replica; a second agent with the same id is refused`, "agent_id");
      }
      const session = new AttachSession(principal.tokenName);
      const transport = ctx.values.get(peerKey);
      await deps.registry.attach(hello, session, transport);
      const log = deps.log.child({ agentId: hello.agentId, agent: hello.name });
      log.info("agent attached", { hostname: hello.hostname, version: hello.agentVersion, token: principal.tokenName, transport });
      if (transport === "cleartext") log.warn("agent attached over cleartext from another machine: its token crossed the network unencrypted (--insecure)");
      if (hello.drainReason) log.info("agent is draining", { reason: hello.drainReason });
      try {
        session.send(
          create(AttachResponseSchema, {
            kind: { case: "helloAccepted", value: { protocolVersion: PROTOCOL_VERSION, coordinatorVersion: FARM_VERSION } },
          }),
        );
        pump(it, hello.agentId, session, deps).then(
          () => session.end(),
          (err: unknown) => {
            // An over-cap inventory ends the stream; the agent sees why, and so does the log.
            if (toErrorReport(err).code === Errors.INVENTORY_TOO_LARGE.code) log.error("agent inventory refused", { principal: principal.tokenName, error: (err as Error).message });
            session.terminate(err instanceof Error ? err : new Error(String(err)));
          },
        );
        // The caller may have gone while the attach was being stored: an aborted signal fires no more events.
        if (ctx.signal.aborted) session.end();
        else ctx.signal.addEventListener("abort", () => session.end(), { once: true });
        for await (const msg of session.outgoing) {
          // The routing benchmark's marks (stage-trace.ts): a call leaves the queue for connect's stream; its result arrives from it.
          if (msg.kind.case === "call") stageTrace?.mark(msg.kind.value.commandId, "co.pull");
          yield msg;
        }
        if (session.error) throw session.error;
      } finally {
        session.end();
        const revoked = isRevocation(ctx.signal.reason);
        // Offline at once; only the last heartbeat time's write can fail, and the stream is over either way.
        await deps.registry.detach(hello.agentId, session, revoked ? TOKEN_REVOKED : "").catch((err: unknown) => {
          log.error("could not store the detached agent's last heartbeat time", { error: (err as Error).message });
        });
        if (revoked) log.warn(`agent detached: its token "${principal.tokenName}" was revoked`, { principal: principal.tokenName });
        else log.info("agent detached", session.error ? { reason: session.error.message } : {});
      }
    },
  });
}

/** An agent token attaches only as the agent it is bound to (its first attach binds it). */
async function bindIdentity(deps: AgentServiceDeps, tokenName: string, hello: AgentHello): Promise<void> {
  try {
    await deps.tokens.bindAgent(tokenName, hello.agentId);
  } catch (err) {
    // Token names are not secrets: the operator needs to know which host's token leaked.
    // (The field is not called "token": the logger redacts fields by that name.)
    deps.log.warn(`agent attach refused: agent token "${tokenName}" may attach only as the agent it is bound to`, {
      code: toErrorReport(err).code,
      principal: tokenName,
      agentId: hello.agentId,
      agent: hello.name,
      hostname: hello.hostname,
      // Best effort: the refusal stands even when these cannot be read.
      boundAgentId: (await deps.tokens.get(tokenName).catch(() => undefined))?.agentId ?? null,
      agentBoundTo: (await deps.tokens.boundTo(hello.agentId).catch(() => undefined)) ?? null,
    });
    throw err;
  }
}

function validateHello(hello: AgentHello): void {
  if (hello.protocolVersion < MIN_AGENT_PROTOCOL || hello.protocolVersion > PROTOCOL_VERSION) {
    throw farmError(
      Errors.AGENT_VERSION_INCOMPATIBLE,
      `agent speaks protocol version ${hello.protocolVersion} (farm ${hello.agentVersion || "unknown"}); ` +
        `this coordinator (farm ${FARM_VERSION}) serves protocol versions ${MIN_AGENT_PROTOCOL}..${PROTOCOL_VERSION}`,
      "protocol_version",
    );
  }
  if (!idPattern.test(hello.agentId)) throw invalidArgument("agent_id", "agent id must be 1-128 of A-Z a-z 0-9 . _ -");
  if (hello.name === "") throw invalidArgument("name", "agent name is required");
  if (hello.heartbeatIntervalMs < 50 || hello.heartbeatIntervalMs > 600_000) {
    throw invalidArgument("heartbeat_interval_ms", "heartbeat interval must be 50..600000 ms");
  }
}

/** Applies the agent's messages to the registry until the stream ends. */
async function pump(
  it: AsyncIterator<AttachRequest>,
  agentId: string,
  session: AttachSession,
  deps: AgentServiceDeps,
): Promise<void> {
  for (;;) {
    const msg = await nextWithin(it, undefined, session.signal);
    if (msg === undefined) return;
    // A session ended by the heartbeat sweep must not touch the registry.
    if (!deps.registry.isAttached(agentId, session)) return;
    switch (msg.kind.case) {
      case "heartbeat":
        deps.registry.heartbeat(agentId);
        break;
      case "inventory":
        deps.registry.heartbeat(agentId);
        await deps.registry.replaceInventory(agentId, msg.kind.value.devices);
        break;
      case "deviceChange": {
        const change = msg.kind.value.kind;
        if (change.case === "upsert") await deps.registry.upsertDevice(agentId, change.value);
        else if (change.case === "removedSerial") await deps.registry.removeDevice(agentId, change.value);
        break;
      }
      case "callResult":
        stageTrace?.mark(msg.kind.value.commandId, "co.recv");
        session.resolve(msg.kind.value);
        break;
      case "draining":
        deps.registry.setDraining(agentId, msg.kind.value.reason || "draining");
        deps.log.info("agent draining: no new leases on its devices", { agentId, reason: msg.kind.value.reason });
        break;
      case "deviceEvent": {
        const e = msg.kind.value;
        deps.log.info("device event", { agentId, serial: e.serial, physicalId: e.physicalId, kind: e.kind, detail: e.detail });
        break;
      }
      case "hello":
        throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, "hello sent twice");
      default:
        // Unknown kinds come from newer agents; ignoring them keeps old coordinators usable.
        break;
    }
  }
}

/** Next message, or undefined at end of stream or when the signal aborts. */
async function nextWithin<T>(
  it: AsyncIterator<T>,
  timeoutMs: number | undefined,
  signal: AbortSignal,
): Promise<T | undefined> {
  if (signal.aborted) return undefined;
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const stop = new Promise<"timeout" | "aborted">((resolve) => {
    if (timeoutMs !== undefined) timer = setTimeout(() => resolve("timeout"), timeoutMs);
    onAbort = () => resolve("aborted");
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    const r = await Promise.race([it.next(), stop]);
    if (r === "timeout") {
      throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, `no hello within ${timeoutMs} ms`);
    }
    if (r === "aborted" || r.done) return undefined;
    return r.value;
  } finally {
    clearTimeout(timer);
    if (onAbort) signal.removeEventListener("abort", onAbort);
  }
}
