import type { TunnelEntry } from "../tunnels.js";

/** A tunnel as OpenTunnel registers it, with no agent behind it; `closedWith` is what closed it. */
export function tunnelEntry(tunnelId: string, owner: string, physicalId: string): TunnelEntry & { closedWith: Error | undefined } {
  const t = {
    tunnelId,
    owner,
    serial: `S-${physicalId}`,
    physicalId,
    agentId: "a-1",
    agentName: "lab-1",
    leaseId: `l-${tunnelId}`,
    actionId: `act-${tunnelId}`,
    openedAt: 1_700_000_000_000,
    bytesToDevice: 10,
    bytesFromDevice: 20,
    streams: new Set<(err: Error) => void>(),
    lastActive: 1_700_000_000_000,
    closedWith: undefined as Error | undefined,
    close(err: Error) {
      t.closedWith ??= err;
    },
  };
  return t;
}
