import type { ConnectRouter } from "@connectrpc/connect";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import { requirePrincipal } from "../auth/auth.js";
import type { AgentCaller } from "../routing/agent-session.js";
import type { Logger } from "@farm/shared/log";
import { create } from "@bufbuild/protobuf";
import {
  RegistryService,
  ListAgentsResponseSchema,
  ListDevicesResponseSchema,
  DrainAgentResponseSchema,
  RemoveAgentResponseSchema,
  AcceptDeviceAliasResponseSchema,
  RejectDeviceAliasResponseSchema,
  ClearDeviceAttentionResponseSchema,
} from "@farm/shared/gen/farm/v1/registry_service_pb";
import type { Registry } from "./registry.js";
import type { DeviceCleanups } from "../cleanup/device-cleanups.js";
import { AgentControlService } from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import { isBinaryRequest, withPreEncodedField } from "@farm/shared/pre-encoded";

export function registerRegistryService(router: ConnectRouter, deps: { registry: Registry; cleanups: DeviceCleanups; log: Logger }): void {
  router.service(RegistryService, {
    /** An admin has seen to a phone whose cleanup failed: it goes back to the pool. */
    async clearDeviceAttention(req, ctx) {
      // Admin only, by the access table.
      const principal = requirePrincipal(ctx);
      if (req.device === "" || req.device.length > 256) throw invalidArgument("device", "an adb serial or a physical id is required");
      const physicalId = deps.registry.physicalIdOf(req.device) ?? (deps.cleanups.rowOf(req.device) ? req.device : undefined);
      if (!physicalId) throw farmError(Errors.DEVICE_NOT_FOUND, `no device ${req.device} (an adb serial an agent reports, or a physical id)`, "device");
      const reason = await deps.cleanups.clear(physicalId);
      deps.log.info("device attention cleared", { physicalId, by: principal.tokenName, reason });
      return create(ClearDeviceAttentionResponseSchema, { physicalId, reason });
    },
    listAgents(req) {
      const page = deps.registry.listAgentsPage(req);
      return create(ListAgentsResponseSchema, { agents: page.items, nextPageToken: page.nextPageToken });
    },
    listDevices(req, ctx) {
      const filter = { agent: req.agent, state: req.state, physicalId: req.physicalId };
      if (isBinaryRequest(ctx.requestHeader.get("content-type"))) {
        const t0 = performance.now();
        // Each device as its field carries it, kept from the last listing: no allocation per device.
        const page = deps.registry.listDevicesEncoded(filter, req, "delimited");
        ctx.responseHeader.set("server-timing", `registry;dur=${(performance.now() - t0).toFixed(2)}`);
        const res = withPreEncodedField(ListDevicesResponseSchema, ListDevicesResponseSchema.field.devices.number, page.items, { delimited: true });
        // A known field, written normally beside the pre-encoded devices.
        res.nextPageToken = page.nextPageToken;
        return res;
      }
      const page = deps.registry.listDevicesPage(filter, req);
      return create(ListDevicesResponseSchema, { devices: page.items, nextPageToken: page.nextPageToken });
    },
    /** Asks an agent to drain and exit; it stops getting leases as soon as it says it drains. */
    async drainAgent(req, ctx) {
      // Admin only, by the access table.
      const principal = requirePrincipal(ctx);
      const agent = deps.registry.findAgent(req.agent);
      if (!agent) throw farmError(Errors.NOT_FOUND, `no agent ${req.agent}`, "agent");
      const attached = deps.registry.agentSession(agent.id);
      if (!attached) throw farmError(Errors.AGENT_OFFLINE, `agent ${agent.name} is offline`, "agent");
      const reason = req.reason || `drain requested by ${principal.tokenName}`;
      deps.log.info("drain requested", { agent: agent.name, by: principal.tokenName, reason });
      await (attached.session as AgentCaller).call(AgentControlService.method.drain, { reason }, principal, Date.now() + (ctx.timeoutMs() ?? 10_000));
      // The agent announces it on its stream too; recording it here closes the gap.
      deps.registry.setDraining(agent.id, reason);
      return create(DrainAgentResponseSchema, { agent: deps.registry.findAgent(agent.id) });
    },
    /** Forgets a detached agent, its stale devices and its alias claims. */
    async removeAgent(req, ctx) {
      // Admin only, by the access table.
      const principal = requirePrincipal(ctx);
      if (req.agent === "") throw invalidArgument("agent", "an agent name or id is required");
      const { agent, removedDevices } = await deps.registry.removeAgent(req.agent);
      deps.log.warn("agent removed", { agent: agent.name, agentId: agent.id, devices: removedDevices, by: principal.tokenName });
      return create(RemoveAgentResponseSchema, { agent, removedDevices });
    },
    async acceptDeviceAlias(req, ctx) {
      return create(AcceptDeviceAliasResponseSchema, { device: await decide(req, "accepted", requirePrincipal(ctx).tokenName) });
    },
    async rejectDeviceAlias(req, ctx) {
      return create(RejectDeviceAliasResponseSchema, { device: await decide(req, "rejected", requirePrincipal(ctx).tokenName) });
    },
  });

  async function decide(req: { serial: string; agent: string }, decision: "accepted" | "rejected", by: string) {
    if (req.serial === "") throw invalidArgument("serial", "--device SERIAL is required");
    if (req.agent === "") throw invalidArgument("agent", "--agent NAME is required: the alias is one agent's claim");
    return deps.registry.decideAlias(req.serial, req.agent, decision, by);
  }
}
