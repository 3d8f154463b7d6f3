import { randomUUID } from "node:crypto";
import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { Errors, farmError, invalidArgument, toErrorReport } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import { ShellService, OpenShellResponseSchema } from "@farm/shared/gen/farm/v1/shell_service_pb";
import { AgentShellService, ServeShellResponseSchema } from "@farm/shared/gen/farm/v1/agent_shell_service_pb";
import { AgentControlService } from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import { requirePrincipal } from "../auth/auth.js";
import type { AgentCaller } from "./agent-session.js";
import type { ActivityLog } from "../activity/activity-log.js";
import type { LeaseManager } from "../leases/lease-manager.js";
import type { Registry } from "../registry/registry.js";
import { RemoteAgentSession } from "../replicas/remote-agent-session.js";
import { routeFor } from "./device-service.js";
import { awaitJoin, SHELL_JOIN_TIMEOUT_MS, type ShellPair, type ShellRelay } from "./shell-relay.js";

export interface ShellServiceDeps {
  registry: Registry;
  leases: LeaseManager;
  activity: ActivityLog;
  relay: ShellRelay;
  log: Logger;
}

/** The caller's side: needs a lease, like any change to a device. */
export function registerShellService(router: ConnectRouter, deps: ShellServiceDeps): void {
  router.service(ShellService, {
    async *openShell(requests, ctx) {
      const principal = requirePrincipal(ctx);
      const it = requests[Symbol.asyncIterator]();
      const first = await it.next();
      if (first.done || first.value.kind.case !== "start") throw invalidArgument("start", "the first message must be start");
      const start = first.value.kind.value;
      const serial = start.target?.serial ?? "";
      if (!serial) throw invalidArgument("target.serial", "a device serial is required");
      const t0 = Date.now();
      const r = await routeFor(deps, serial, start.target?.agent ?? "", true, ctx.requestHeader.get("x-farm-lease"), { method: ShellService.method.openShell, caller: principal });
      const session = r.session as AgentCaller;
      const sessionId = randomUUID();
      let pair: ShellPair | undefined;
      let outcome = "ok";
      try {
        // The agent's stream goes to the replica holding its control stream: the session is opened there first.
        pair = session instanceof RemoteAgentSession ? await session.openShell(sessionId, Date.now() + SHELL_JOIN_TIMEOUT_MS) : deps.relay.open(sessionId);
        const started = await session.call(
          AgentControlService.method.startShell,
          { sessionId, ...(start.target ? { target: start.target } : {}), ...(start.size ? { size: start.size } : {}), term: start.term },
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
              const m = await it.next();
              if (m.done) break;
              if (m.value.kind.case === "stdin") toAgent.push(create(ServeShellResponseSchema, { kind: { case: "stdin", value: m.value.kind.value } }));
              else if (m.value.kind.case === "resize") toAgent.push(create(ServeShellResponseSchema, { kind: { case: "resize", value: m.value.kind.value } }));
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
          serial,
          physicalId: r.physicalId,
          agentId: r.agentId,
          command: "openShell",
          outcome,
          durationMs: Date.now() - t0,
          requestId: "",
          detail: "interactive",
        });
      }
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
