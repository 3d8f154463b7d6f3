import type { ServiceImpl } from "@connectrpc/connect";
import type { AgentControlService } from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import { callContext } from "./call-context.js";
import { serialOf } from "./device-service.js";
import type { AgentServiceDeps } from "./service-deps.js";

/** What the coordinator itself asks of this agent: interactive shells and draining. */
export function agentControlService(deps: AgentServiceDeps): ServiceImpl<typeof AgentControlService> {
  return {
    async startShell(req, ctx) {
      const c = callContext(ctx);
      let started!: (id: string) => void;
      const startedPromise = new Promise<string>((resolve) => (started = resolve));
      // The session outlives this call: it runs until the terminal exits.
      const session = deps.ownership.run(
        deps.interactiveShell,
        { command: req, onStarted: (id) => started(id) },
        { serial: serialOf(req.target), deadlineMs: c.deadlineMs, requestedBy: c.requestedBy, runDeadlineMs: Date.now() + 24 * 3_600_000 },
      );
      session.catch((err: unknown) => deps.log.warn("interactive shell ended with an error", { error: (err as Error).message }));
      const actionId = await Promise.race([
        startedPromise,
        session.then(() => {
          throw new Error("the shell ended before it started");
        }),
      ]);
      return { actionId };
    },
    drain(req) {
      deps.onDrainRequested(req.reason);
      return {};
    },
  };
}
