import { randomUUID } from "node:crypto";
import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import type { DescMethod } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import { Errors, farmError, invalidArgument, toErrorReport } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import { ShellService, OpenShellResponseSchema, WatchShellResponseSchema, type OpenShellResponse, type ShellStart } from "@farm/shared/gen/farm/v1/shell_service_pb";
import type { TerminalSize } from "@farm/shared/gen/farm/v1/shell_pb";
import { AgentShellService, ServeShellResponseSchema } from "@farm/shared/gen/farm/v1/agent_shell_service_pb";
import { AgentControlService } from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import { requirePrincipal } from "../auth/auth.js";
import type { AgentCaller } from "./agent-session.js";
import type { ActivityLog } from "../activity/activity-log.js";
import type { LeaseManager } from "../leases/lease-manager.js";
import type { Registry } from "../registry/registry.js";
import { RemoteAgentSession } from "../replicas/remote-agent-session.js";
import { routeFor } from "./device-service.js";
import { BrowserShells, SHELL_INPUT_MAX_BYTES } from "./browser-shells.js";
import { awaitJoin, SHELL_JOIN_TIMEOUT_MS, type ShellPair, type ShellRelay } from "./shell-relay.js";

export interface ShellServiceDeps {
  registry: Registry;
  leases: LeaseManager;
  activity: ActivityLog;
  relay: ShellRelay;
  log: Logger;
  /** Shells opened by WatchShell, for SendShellInput (tests pass their own to look inside). */
  browserShells?: BrowserShells;
}

/** What the caller sends a running shell. */
export type ShellInput = { case: "stdin"; value: Uint8Array } | { case: "resize"; value: TerminalSize };

/**
 * One interactive shell, caller to agent: routed as a change (the caller's
 * lease), journaled on the agent, in the activity log when it ends. Yields
 * the action id first, then the agent's output and exit code; the caller's
 * input is read from `input` until it ends, which hangs the shell up.
 */
async function* relayShell(
  deps: ShellServiceDeps,
  ctx: HandlerContext,
  start: ShellStart,
  input: AsyncIterator<ShellInput | undefined>,
  method: DescMethod,
  detail: string,
): AsyncGenerator<OpenShellResponse> {
  const principal = requirePrincipal(ctx);
  const serial = start.target?.serial ?? "";
  if (!serial) throw invalidArgument("target.serial", "a device serial is required");
  const t0 = Date.now();
  const r = await routeFor(deps, serial, start.target?.agent ?? "", true, ctx.requestHeader.get("x-farm-lease"), { method, caller: principal });
  const session = r.session as AgentCaller;
  const sessionId = randomUUID();
  let pair: ShellPair | undefined;
  let outcome = "ok";
  try {
    // The agent's stream goes to the replica holding its control stream: the session is opened there first.
    pair = session instanceof RemoteAgentSession ? await session.openShell(sessionId, Date.now() + SHELL_JOIN_TIMEOUT_MS) : deps.relay.open(sessionId);
    const started = await session.call(
      AgentControlService.method.startShell,
      // The serial the phone is reported on (the caller may have named it by physical id).
      { sessionId, ...(start.target ? { target: { ...start.target, serial: r.serial } } : {}), ...(start.size ? { size: start.size } : {}), term: start.term },
      principal,
      Date.now() + SHELL_JOIN_TIMEOUT_MS,
    );
    await awaitJoin(pair, SHELL_JOIN_TIMEOUT_MS);
    yield create(OpenShellResponseSchema, { kind: { case: "actionId", value: started.actionId } });
    const toAgent = pair.toAgent;
    // Caller -> agent, in the background; the caller leaving hangs the session up.
    void (async () => {
      try {
        for (;;) {
          const m = await input.next();
          if (m.done) break;
          if (m.value?.case === "stdin") toAgent.push(create(ServeShellResponseSchema, { kind: { case: "stdin", value: m.value.value } }));
          else if (m.value?.case === "resize") toAgent.push(create(ServeShellResponseSchema, { kind: { case: "resize", value: m.value.value } }));
        }
      } catch {
        /* caller gone */
      }
      toAgent.push(create(ServeShellResponseSchema, { kind: { case: "hangup", value: true } }));
      toAgent.close();
    })();
    for await (const msg of pair.toCaller) yield msg;
    // Cut, not ended (the replica carrying it was lost): the caller hears why.
    if (pair.error) throw pair.error;
  } catch (err) {
    outcome = toErrorReport(err).code;
    throw err;
  } finally {
    pair?.end();
    // Never throws: a failed history write must not turn the shell's end into an error.
    await deps.activity.recordAfter({
      at: t0,
      caller: principal.tokenName,
      leaseId: r.leaseId,
      // The serial the phone is reported on, not a physical id prefix the caller named it by.
      serial: r.serial,
      physicalId: r.physicalId,
      agentId: r.agentId,
      command: "openShell",
      outcome,
      durationMs: Date.now() - t0,
      requestId: "",
      detail,
    });
  }
}

/** The caller's side: needs a lease, like any change to a device. */
export function registerShellService(router: ConnectRouter, deps: ShellServiceDeps): void {
  const browserShells = deps.browserShells ?? new BrowserShells();
  router.service(ShellService, {
    async *openShell(requests, ctx) {
      requirePrincipal(ctx);
      const it = requests[Symbol.asyncIterator]();
      const first = await it.next();
      if (first.done || first.value.kind.case !== "start") throw invalidArgument("start", "the first message must be start");
      const input: AsyncIterator<ShellInput | undefined> = {
        next: async () => {
          const m = await it.next();
          if (m.done) return { done: true, value: undefined };
          const k = m.value.kind;
          return { done: false, value: k.case === "stdin" || k.case === "resize" ? (k as ShellInput) : undefined };
        },
      };
      yield* relayShell(deps, ctx, first.value.kind.value, input, ShellService.method.openShell, "interactive");
    },
    async *watchShell(req, ctx) {
      const principal = requirePrincipal(ctx);
      if (!req.start) throw invalidArgument("start", "start is required");
      const shell = browserShells.open(principal.tokenName);
      // The browser closing the call (its tab, or the page) ends the shell.
      const onAbort = () => shell.input.close();
      ctx.signal.addEventListener("abort", onAbort, { once: true });
      try {
        for await (const msg of relayShell(deps, ctx, req.start, shell.input[Symbol.asyncIterator](), ShellService.method.watchShell, "interactive (dashboard)")) {
          const k = msg.kind;
          if (k.case === "actionId") yield create(WatchShellResponseSchema, { kind: { case: "opened", value: { shellId: shell.id, actionId: k.value } } });
          else if (k.case === "output") yield create(WatchShellResponseSchema, { kind: { case: "output", value: k.value } });
          else if (k.case === "exitCode") yield create(WatchShellResponseSchema, { kind: { case: "exitCode", value: k.value } });
        }
      } finally {
        ctx.signal.removeEventListener("abort", onAbort);
        browserShells.close(shell);
      }
    },
    async sendShellInput(req, ctx) {
      const principal = requirePrincipal(ctx);
      const shell = browserShells.get(req.shellId, principal.tokenName);
      const k = req.kind;
      if (k.case === "stdin") {
        if (k.value.length === 0 || k.value.length > SHELL_INPUT_MAX_BYTES) throw invalidArgument("stdin", `terminal input is 1..${SHELL_INPUT_MAX_BYTES} bytes a call`);
        await shell.send({ case: "stdin", value: k.value }, ctx.signal);
      } else if (k.case === "resize") {
        if (k.value.rows === 0 || k.value.cols === 0 || k.value.rows > 1000 || k.value.cols > 1000) throw invalidArgument("resize", "rows and cols are 1..1000");
        await shell.send({ case: "resize", value: k.value }, ctx.signal);
      } else throw invalidArgument("kind", "say stdin or resize");
      return {};
    },
  });
}

/** The agent's side: joins the session it was told to serve. */
export function registerAgentShellService(router: ConnectRouter, deps: { relay: ShellRelay }): void {
  router.service(AgentShellService, {
    async *serveShell(requests) {
      const it = requests[Symbol.asyncIterator]();
      const first = await it.next();
      if (first.done || first.value.kind.case !== "sessionId") throw invalidArgument("session_id", "the first message must be the session id");
      const pair = deps.relay.claim(first.value.kind.value);
      if (!pair) throw farmError(Errors.NOT_FOUND, "no such shell session", "session_id");
      void (async () => {
        try {
          for (;;) {
            const m = await it.next();
            if (m.done) break;
            if (m.value.kind.case === "output") pair.toCaller.push(create(OpenShellResponseSchema, { kind: { case: "output", value: m.value.kind.value } }));
            else if (m.value.kind.case === "exitCode") pair.toCaller.push(create(OpenShellResponseSchema, { kind: { case: "exitCode", value: m.value.kind.value } }));
          }
        } catch {
          /* agent gone: the caller's stream ends without an exit code */
        }
        pair.toCaller.close();
      })();
      for await (const msg of pair.toAgent) yield msg;
    },
  });
}
