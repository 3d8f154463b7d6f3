import { AdbTunnelService } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { allPages } from "@farm/client/all-pages";
import { serviceClient } from "@farm/client/transport";
import { ago, table } from "../output.js";
import { clientSession } from "../session.js";
import type { adbListOptions } from "../tree/adb-commands.js";
import type { Action } from "../tree/spec.js";
import { disconnectStaleTunnels, staleLines } from "@farm/client/adb/stale-tunnels";
import { isServingProcess, readTunnelStates } from "@farm/client/adb/tunnel-state";

/**
 * `farm adb list`: the coordinator's tunnels, each with its local serial
 * when this machine serves it. First, the serials of tunnels whose serving
 * process died are taken out of the user's adb server (and listed).
 */
export const list: Action<typeof adbListOptions> = async (input) => {
  const { ctx } = input;
  const session = clientSession(input);
  const staleDisconnected = await disconnectStaleTunnels(ctx.env, (line) => ctx.writeErr(`farm adb: ${line}\n`));
  // mine: the caller's own (an admin's: everyone's); without it, every user's tunnels are listed.
  const client = serviceClient(AdbTunnelService, session.config);
  const listedTunnels = await allPages(async (page) => {
    const res = await client.listTunnels({ mine: true, ...page }, { timeoutMs: session.timeoutMs });
    return { items: res.tunnels, nextPageToken: res.nextPageToken };
  });
  const states = await readTunnelStates(ctx.env);
  const local = new Map(states.map((s) => [s.tunnelId, s]));
  const tunnels = listedTunnels.map((t) => {
    const s = local.get(t.tunnelId);
    return {
      tunnel: t.tunnelId,
      device: t.serial,
      physicalId: t.physicalId,
      agent: t.agentName,
      lease: t.leaseId,
      owner: t.owner,
      openedAt: new Date(Number(t.openedAtMs)).toISOString(),
      bytesToDevice: Number(t.bytesToDevice),
      bytesFromDevice: Number(t.bytesFromDevice),
      openStreams: t.openStreams,
      local: s?.serial ?? null,
      pid: s && isServingProcess(s) ? s.pid : null,
    };
  });
  // Served here but unknown to the coordinator: closed while this machine was not looking, or another coordinator's.
  const listed = new Set(listedTunnels.map((t) => t.tunnelId));
  const localOnly = states
    .filter((s) => !listed.has(s.tunnelId))
    .map((s) => ({ tunnel: s.tunnelId, device: s.device, local: s.serial, coordinator: s.coordinator, pid: isServingProcess(s) ? s.pid : null }));
  const wide = ctx.printer.wide;
  ctx.printer.result({ tunnels, localOnly, staleDisconnected }, () =>
    [
      ...staleLines(staleDisconnected),
      table(
        ["TUNNEL", "DEVICE", "LOCAL", "AGENT", "OWNER", "OPENED", "STREAMS", ...(wide ? ["PHYSICAL", "LEASE", "TO DEVICE", "FROM DEVICE", "PID"] : [])],
        tunnels.map((t) => [
          t.tunnel,
          t.device,
          t.local ?? "-",
          t.agent,
          t.owner,
          ago(Date.parse(t.openedAt)),
          String(t.openStreams),
          ...(wide ? [t.physicalId, t.lease, String(t.bytesToDevice), String(t.bytesFromDevice), t.pid === null ? "-" : String(t.pid)] : []),
        ]),
      ),
      ...(localOnly.length
        ? ["", "served here, not listed by the coordinator (farm adb disconnect --device LOCAL cleans up):", ...localOnly.map((l) => `  ${l.local}  ${l.device}  tunnel ${l.tunnel}${l.pid === null ? " (not running)" : ` (pid ${l.pid})`}`)]
        : []),
    ].join("\n"));
  return 0;
};
