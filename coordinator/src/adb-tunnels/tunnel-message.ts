import { create } from "@bufbuild/protobuf";
import { TunnelSchema, type Tunnel } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import type { TunnelEntry } from "./tunnels.js";

/** A tunnel's wire form, shared by ListTunnels, OpenTunnel and the watch stream. */
export function tunnelMessage(t: TunnelEntry): Tunnel {
  return create(TunnelSchema, {
    tunnelId: t.tunnelId,
    serial: t.serial,
    physicalId: t.physicalId,
    agentName: t.agentName,
    leaseId: t.leaseId,
    owner: t.owner,
    openedAtMs: BigInt(t.openedAt),
    actionId: t.actionId,
    bytesToDevice: BigInt(t.bytesToDevice),
    bytesFromDevice: BigInt(t.bytesFromDevice),
    openStreams: t.streams.size,
  });
}
