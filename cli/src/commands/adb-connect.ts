import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, openSync, readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { Errors, errorSpecOf, type ErrorReport } from "@farm/shared/errors";
import { CliError } from "../cli-error.js";
import { cliErrorReport } from "../cli-error-report.js";
import type { ClientConfig } from "@farm/client/config";
import { clientSession } from "../session.js";
import type { adbConnectOptions, adbServeOptions } from "../tree/adb-commands.js";
import type { Action, CommandContext } from "../tree/spec.js";
import { serveTunnel, type ConnectResult, type ServeOutcome, type ServeParams } from "@farm/client/adb/tunnel-serve";
import { disconnectStaleTunnels, staleLines, type StaleDisconnected } from "@farm/client/adb/stale-tunnels";
import { ensureTunnelsDir, logPath, pruneOldLogs } from "@farm/client/adb/tunnel-state";

/** What the background process tells `farm adb connect` over IPC, once. */
type Report = { kind: "ready"; result: ConnectResult & { pid: number } } | { kind: "failed"; report: ErrorReport };

/** A report from another process as the error it stands for (same build: the code is in the table). */
function errorOf(report: ErrorReport): CliError {
  return new CliError(errorSpecOf(report.code) ?? Errors.INTERNAL, report.message, report.field);
}

function printConnected(ctx: CommandContext, r: ConnectResult, pid: number, stale: StaleDisconnected[]): void {
  ctx.printer.result({ serial: r.serial, device: r.device, tunnel: r.tunnel, lease: r.lease, pid, staleDisconnected: stale }, () =>
    [
      ...staleLines(stale),
      `connected ${r.serial}: ${r.device} (${r.physicalId} on ${r.agent}), tunnel ${r.tunnel}`,
      `  adb -s ${r.serial} shell`,
      `  farm adb disconnect --device ${r.serial}`,
    ].join("\n"));
}

/** The options connect and serve share. */
interface ServeInput {
  opts: { device: string | undefined; lease: string | undefined; agent: string | undefined; port: number; adbPort: number | undefined; timeout: number };
  ctx: CommandContext;
}

function requireTarget(opts: ServeInput["opts"]): void {
  if (!opts.device && !opts.lease) throw new CliError(Errors.INVALID_ARGUMENT, "--device or --lease is required (or FARM_DEVICE / FARM_LEASE)", "device");
}

function paramsOf({ opts, ctx }: ServeInput, config: ClientConfig, extra: Pick<ServeParams, "foreground" | "logFile" | "stopSignal" | "log" | "onReady">): ServeParams {
  requireTarget(opts);
  return {
    config,
    leaseToken: opts.lease || undefined,
    serial: opts.device || undefined,
    agent: opts.agent || undefined,
    port: opts.port,
    adb: { serverPort: opts.adbPort, env: ctx.env },
    timeoutMs: opts.timeout,
    env: ctx.env,
    ...extra,
  };
}

/** Why the farm closed a tunnel, as this command's failure. */
function closedError(outcome: ServeOutcome & { reason: ErrorReport }): CliError {
  const r = outcome.result;
  return errorOf({ ...outcome.reason, message: `remote adb tunnel ${r.tunnel} to ${r.device} closed, ${r.serial} disconnected: ${outcome.reason.message}` });
}

/** `farm adb connect`: in a background process by default, or here with --foreground. */
export const connect: Action<typeof adbConnectOptions> = async (input) => {
  const { opts, ctx } = input;
  const session = clientSession(input);
  requireTarget(opts);
  const token = session.config.token;
  if (!token) throw new CliError(Errors.UNAUTHENTICATED, "no token: pass --token-file, set FARM_TOKEN, put a token in the config file, or run `farm standalone` locally", "token");
  // Before the new serial exists: a stale one may be on the very port the new endpoint gets.
  const stale = await disconnectStaleTunnels(ctx.env, (line) => ctx.writeErr(`farm adb: ${line}\n`));
  if (!opts.foreground) return connectInBackground(input, session.config, token, stale);
  const outcome = await serveTunnel(
    paramsOf(input, session.config, {
      foreground: true,
      logFile: null,
      stopSignal: ctx.stopSignal,
      log: (line) => ctx.writeErr(`farm adb: ${line}\n`),
      onReady: (r) => printConnected(ctx, r, process.pid, stale),
    }),
  );
  // The farm closed the tunnel: the reason is this command's failure, printed like any other (one line, code and message).
  if (outcome.reason) throw closedError({ ...outcome, reason: outcome.reason });
  if (ctx.format !== "json") ctx.writeErr(`farm adb: disconnected ${outcome.result.serial}\n`);
  return outcome.code;
};

/**
 * Starts `farm adb serve` detached (its own session, so closing the
 * terminal does not stop it), with the token and lease in its environment
 * rather than on its command line, and waits for its one report.
 */
async function connectInBackground(input: Parameters<Action<typeof adbConnectOptions>>[0], config: ClientConfig, token: string, stale: StaleDisconnected[]): Promise<number> {
  const { opts, ctx } = input;
  const entry = ctx.entry;
  if (!entry) throw new CliError(Errors.INTERNAL, "cannot find the farm CLI's own entry point to start the background process; use --foreground");
  await ensureTunnelsDir(ctx.env);
  await pruneOldLogs(ctx.env);
  const logFile = logPath(ctx.env, `serve-${new Date().toISOString().replace(/[:.]/g, "-")}-${randomBytes(3).toString("hex")}`);
  const args = [entry, "adb", "serve", "-o", "json", "--coordinator", config.coordinator, "--port", String(opts.port), "--timeout", String(opts.timeout), "--log-file", logFile];
  if (config.caFile) args.push("--ca-file", config.caFile);
  if (config.insecure) args.push("--insecure");
  if (opts.device) args.push("--device", opts.device);
  if (opts.agent) args.push("--agent", opts.agent);
  if (opts.adbPort !== undefined) args.push("--adb-port", String(opts.adbPort));
  const env: NodeJS.ProcessEnv = { ...ctx.env, FARM_TOKEN: token };
  if (opts.lease) env["FARM_LEASE"] = opts.lease;
  else delete env["FARM_LEASE"];
  const fd = openSync(logFile, "a", 0o600);
  let child: ChildProcess;
  try {
    child = spawn(process.execPath, args, { detached: true, stdio: ["ignore", fd, fd, "ipc"], env });
  } finally {
    closeSync(fd);
  }
  // Setting up takes a few calls of at most --timeout each, and adb connect's own 10 s.
  const report = await waitForReport(child, 3 * opts.timeout + 30_000, ctx.stopSignal, logFile);
  child.unref();
  if (child.connected) child.disconnect();
  if (report.kind === "failed") {
    // Printed here; the log would only say it again.
    await rm(logFile, { force: true });
    throw errorOf(report.report);
  }
  printConnected(ctx, report.result, report.result.pid, stale);
  return 0;
}

function logTail(logFile: string): string {
  try {
    return readFileSync(logFile, "utf8").trim().split("\n").slice(-5).join("\n");
  } catch {
    return "";
  }
}

function waitForReport(child: ChildProcess, timeoutMs: number, stop: AbortSignal, logFile: string): Promise<Report> {
  return new Promise<Report>((resolve, reject) => {
    const finish = (settle: () => void) => {
      clearTimeout(timer);
      stop.removeEventListener("abort", onStop);
      child.off("message", onMessage);
      child.off("exit", onExit);
      child.off("error", onError);
      settle();
    };
    const onMessage = (m: unknown) => finish(() => resolve(m as Report));
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      const tail = logTail(logFile);
      finish(() => reject(new CliError(Errors.INTERNAL, `the background process exited (${code ?? signal}) before the tunnel was up; its log ${logFile}${tail ? `:\n${tail}` : " is empty"}`)));
    };
    const onError = (err: Error) => finish(() => reject(new CliError(Errors.INTERNAL, `cannot start the background process: ${err.message}`)));
    const onStop = () => {
      child.kill("SIGTERM");
      finish(() => reject(new CliError(Errors.TUNNEL_CLOSED, "stopped before the tunnel was up")));
    };
    const timer = setTimeout(() => {
      child.kill("SIGTERM");
      finish(() => reject(new CliError(Errors.DEADLINE_EXCEEDED, `the tunnel was not up within ${timeoutMs} ms; see ${logFile}`)));
    }, timeoutMs);
    child.on("message", onMessage);
    child.once("exit", onExit);
    child.once("error", onError);
    stop.addEventListener("abort", onStop, { once: true });
  });
}

/** Sends one message to the parent and waits until it is written. */
function tellParent(report: Report): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send || !process.connected) {
      resolve();
      return;
    }
    process.send(report, undefined, {}, () => resolve());
  });
}

/** `farm adb serve`: the background process. Logs go to stdout/stderr (the log file); one report goes to the parent. */
export const serve: Action<typeof adbServeOptions> = async (input) => {
  const { opts, ctx } = input;
  const session = clientSession(input);
  const log = (line: string) => process.stderr.write(`${new Date().toISOString()} farm adb: ${line}\n`);
  const stop = new AbortController();
  const onStop = () => stop.abort();
  ctx.stopSignal.addEventListener("abort", onStop, { once: true });
  let ready = false;
  // The parent gone before the tunnel is up: nobody will learn of it, so give up.
  const onParentGone = () => {
    if (!ready) stop.abort();
  };
  process.once("disconnect", onParentGone);
  try {
    const outcome = await serveTunnel(
      paramsOf(input, session.config, {
        foreground: false,
        logFile: opts.logFile ?? null,
        stopSignal: stop.signal,
        log,
        onReady: (result) => {
          ready = true;
          void tellParent({ kind: "ready", result: { ...result, pid: process.pid } }).then(() => {
            if (process.connected) process.disconnect();
          });
        },
      }),
    );
    const r = outcome.result;
    if (outcome.reason) log(closedError({ ...outcome, reason: outcome.reason }).message + ` [${outcome.reason.code}]`);
    else log(`disconnected ${r.serial}: tunnel ${r.tunnel} to ${r.device} closed on request`);
    return outcome.code;
  } catch (err) {
    const report = cliErrorReport(err);
    log(`failed: ${report.message} [${report.code}]`);
    if (!ready) await tellParent({ kind: "failed", report });
    return 1;
  } finally {
    process.off("disconnect", onParentGone);
    ctx.stopSignal.removeEventListener("abort", onStop);
  }
};
