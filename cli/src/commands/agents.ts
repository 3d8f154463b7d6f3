import { toJson } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { AgentSchema } from "@farm/shared/gen/farm/v1/registry_pb";
import { allPages } from "@farm/client/all-pages";
import { serviceClient } from "@farm/client/transport";
import { ago, table } from "../output.js";
import { clientSession } from "../session.js";
import type { agentListOptions } from "../tree/agent-commands.js";
import type { Action } from "../tree/spec.js";

/** `farm agent list` / `farm agents`; -o wide adds protocol and adb versions, connection time and drain reason. */
export const listAgents: Action<typeof agentListOptions> = async (input) => {
  const session = clientSession(input);
  const client = serviceClient(RegistryService, session.config);
  const pages = await allPages(async (page) => {
    const res = await client.listAgents(page, { timeoutMs: session.timeoutMs });
    return { items: res.agents, nextPageToken: res.nextPageToken };
  });
  // The coordinator pages by id (a name can change); people look agents up by name.
  const agents = pages.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.id < b.id ? -1 : 1));
  const wide = input.ctx.printer.wide;
  input.ctx.printer.result({ agents: agents.map((a) => toJson(AgentSchema, a, { alwaysEmitImplicit: true })) }, () =>
    table(
      ["NAME", "STATUS", "TRANSPORT", "DEVICES", "VERSION", "HOST", "LAST HEARTBEAT", "ID", ...(wide ? ["PROTOCOL", "ADB", "CONNECTED", "DRAIN REASON"] : [])],
      agents.map((a) => [
        a.name,
        !a.online ? (a.offlineReason ? `offline (${a.offlineReason})` : "offline") : a.draining ? "draining" : "online",
        // A token that crossed a network in cleartext is worth seeing at a glance.
        a.transport === "cleartext" ? "CLEARTEXT (insecure)" : a.transport || "-",
        String(a.deviceCount),
        a.agentVersion,
        a.hostname,
        ago(a.lastHeartbeatTime ? timestampMs(a.lastHeartbeatTime) : undefined),
        a.id,
        ...(wide ? [String(a.protocolVersion), a.adbVersion, ago(a.connectedTime ? timestampMs(a.connectedTime) : undefined), a.drainReason] : []),
      ]),
    ));
  return 0;
};
