import { setTimeout as delay } from "node:timers/promises";
import { Errors } from "@farm/shared/errors";
import { AdbTunnelService } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { CliError } from "../cli-error.js";
import { serviceClient } from "@farm/client/transport";
import { table } from "../output.js";
import { clientSession } from "../session.js";
import type { adbDisconnectOptions } from "../tree/adb-commands.js";
import type { Action } from "../tree/spec.js";
import { adbDisconnect } from "@farm/client/adb/local-adb-cli";
import { isServingProcess, localAdbOf, readTunnelStates, removeTunnelState, type TunnelState } from "@farm/client/adb/tunnel-state";

/** How long a serving process may take to close its tunnel and `adb disconnect` after SIGTERM. */
const STOP_TIMEOUT_MS = 15_000;
/** After CloseTunnel, how long the local process gets to notice on its own before it is told. */
const NOTICE_MS = 5_000;

interface Disconnected {
  tunnel: string;
  serial: string | null;
  device: string | null;
}

/** Polls (another process's exit has no event to wait on) until the state's process is gone. */
async function gone(state: TunnelState, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (isServingProcess(state)) {
    if (Date.now() >= deadline) return false;
    await delay(50);
  }
  return true;
}

/**
 * Stops the process serving a tunnel: SIGTERM, only after checking the pid
 * is still that process (its start time); it closes the tunnel, runs `adb
 * disconnect` and removes its state. A process that is already gone left
 * that to us.
 */
async function stopLocal(env: NodeJS.ProcessEnv, state: TunnelState, noticeMs = 0): Promise<void> {
  if (isServingProcess(state) && !(noticeMs > 0 && (await gone(state, noticeMs)))) {
    process.kill(state.pid, "SIGTERM");
    if (!(await gone(state, STOP_TIMEOUT_MS))) {
      throw new CliError(Errors.INTERNAL, `process ${state.pid} serving ${state.serial} did not stop within ${STOP_TIMEOUT_MS / 1000} s`, "device");
    }
  }
  // Whatever the process did not get to (killed, crashed): its cleanup, here.
  await adbDisconnect(localAdbOf(state, env), state.serial);
  await removeTunnelState(env, state.tunnelId);
}

/** `farm adb disconnect --device 127.0.0.1:PORT | --tunnel ID | --all`. */
export const disconnect: Action<typeof adbDisconnectOptions> = async (input) => {
  const { opts, ctx } = input;
  const given = [opts.device !== undefined, opts.tunnel !== undefined, opts.all].filter(Boolean).length;
  if (given !== 1) throw new CliError(Errors.INVALID_ARGUMENT, "give one of --device 127.0.0.1:PORT, --tunnel ID or --all", given === 0 ? "device" : "all");
  const states = await readTunnelStates(ctx.env);
  const done: Disconnected[] = [];
  if (opts.tunnel !== undefined) {
    const local = states.find((s) => s.tunnelId === opts.tunnel);
    const session = clientSession(input);
    try {
      await serviceClient(AdbTunnelService, session.config).closeTunnel({ tunnelId: opts.tunnel }, { timeoutMs: session.timeoutMs });
    } catch (err) {
      // The coordinator no longer knows it (or cannot be reached): this machine's side still goes.
      if (!local) throw err;
    }
    if (local) await stopLocal(ctx.env, local, NOTICE_MS);
    done.push({ tunnel: opts.tunnel, serial: local?.serial ?? null, device: local?.device ?? null });
  } else {
    const chosen = opts.all ? states : states.filter((s) => s.serial === opts.device || s.device === opts.device);
    if (chosen.length === 0 && !opts.all) throw new CliError(Errors.TUNNEL_NOT_FOUND, `no tunnel served from this machine is ${opts.device} (see farm adb list)`, "device");
    for (const s of chosen) {
      await stopLocal(ctx.env, s);
      done.push({ tunnel: s.tunnelId, serial: s.serial, device: s.device });
    }
  }
  ctx.printer.result({ disconnected: done }, () =>
    table(
      ["TUNNEL", "LOCAL", "DEVICE"],
      done.map((d) => [d.tunnel, d.serial ?? "-", d.device ?? "-"]),
    ));
  return 0;
};
