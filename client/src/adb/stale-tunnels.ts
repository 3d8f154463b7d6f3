import { adbDisconnectOutcome } from "./local-adb-cli.js";
import { isStale, localAdbOf, readTunnelStates, removeTunnelState, type TunnelState } from "./tunnel-state.js";

/** A tunnel whose serving process had died, and whose serial was taken out of the adb server. */
export interface StaleDisconnected {
  tunnel: string;
  /** The local serial that was disconnected: 127.0.0.1:PORT. */
  serial: string;
  /** The phone's serial on its agent. */
  device: string;
}

const sameAdb = (a: TunnelState, b: TunnelState) => a.serial === b.serial && (a.adbServerPort ?? null) === (b.adbServerPort ?? null) && (a.adbServerSocket ?? null) === (b.adbServerSocket ?? null);

/**
 * A serving process killed before its cleanup (kill -9, OOM, a crash)
 * leaves its serial `offline` in the user's adb server, which keeps
 * reconnecting to 127.0.0.1:PORT: another local user who binds that port
 * is then taken for the phone. For every tunnel this machine served whose
 * process is gone, this runs `adb disconnect` on the adb server it was
 * connected to and forgets the tunnel. One that adb did not disconnect is
 * kept (and warned of) to be tried again next time; one the adb server
 * no longer had, or whose serial a live tunnel now uses again, is only
 * forgotten. Only serials adb said it disconnected are returned.
 */
export async function disconnectStaleTunnels(env: NodeJS.ProcessEnv, warn: (line: string) => void): Promise<StaleDisconnected[]> {
  const states = await readTunnelStates(env);
  const stale = states.filter(isStale);
  const live = states.filter((s) => !stale.includes(s));
  const done: StaleDisconnected[] = [];
  for (const s of stale) {
    if (!live.some((l) => sameAdb(l, s))) {
      const outcome = await adbDisconnectOutcome(localAdbOf(s, env), s.serial);
      if (outcome.kind === "failed") {
        warn(`could not disconnect ${s.serial}, left by tunnel ${s.tunnelId} whose process ${s.pid} is gone: ${outcome.why}`);
        continue;
      }
      // "absent": adb had already dropped it (it gives up after about a minute of failed reconnects); nothing to report.
      if (outcome.kind === "disconnected") done.push({ tunnel: s.tunnelId, serial: s.serial, device: s.device });
    }
    await removeTunnelState(env, s.tunnelId);
  }
  return done;
}

/** What `farm adb connect` and `farm adb list` say of the stale serials they took out of adb. */
export function staleLines(stale: StaleDisconnected[]): string[] {
  return stale.map((s) => `disconnected stale ${s.serial} (${s.device}, tunnel ${s.tunnel}): the process serving it had died`);
}
