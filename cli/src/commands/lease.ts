import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Errors, errorSpecOf, toErrorReport } from "@farm/shared/errors";
import { CliError } from "../cli-error.js";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { LeaseSelectorSchema, type Lease, type LeaseSelector, type LeaseWaiter } from "@farm/shared/gen/farm/v1/lease_pb";
import { allPages } from "@farm/client/all-pages";
import { acquireWithTicket } from "@farm/client/lease-acquire";
import { serviceClient } from "@farm/client/transport";
import type { OptionValues } from "../options/option-decl.js";
import { createPrinter, table } from "../output.js";
import { join, resolve } from "node:path";
import { validateOutputDir } from "@farm/shared/evidence-options";
import { clientSession, type SessionInput } from "../session.js";
import type { acquireOptions, leaseListOptions, releaseOptions, renewOptions, runOptions, selectorOptions } from "../tree/lease-commands.js";
import type { Action, CommandContext } from "../tree/spec.js";
import { followQueue } from "../progress/lease-wait.js";
import { parseLabels } from "./label.js";
import { endSessionAs, listAllSteps, startSessionOn } from "./session.js";
import { leaseRunSummary, summaryLine } from "./lease-run-summary.js";
import { writeSummaryFile, summaryPath } from "./lease-run-summary-file.js";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { sessionPolicyInput } from "../session-policy-input.js";

type Selector = OptionValues<typeof selectorOptions>;

function selectorOf(opts: Selector): LeaseSelector {
  return create(LeaseSelectorSchema, {
    serial: opts.device ?? "",
    physicalId: opts.physicalId ?? "",
    labels: parseLabels(opts.label),
    model: opts.model ?? "",
    apiLevelMin: opts.apiLevel?.min ?? 0,
    apiLevelMax: opts.apiLevel?.max ?? 0,
    agent: opts.agent ?? "",
  });
}

function leaseJson(l: Lease | undefined, token?: string) {
  if (!l) return null;
  return {
    leaseId: l.leaseId,
    ...(token ? { token } : {}),
    holder: l.holder,
    physicalId: l.physicalId,
    agentId: l.agentId,
    agentName: l.agentName,
    serial: l.serial,
    acquiredAt: l.acquireTime ? new Date(timestampMs(l.acquireTime)).toISOString() : null,
    expiresAt: l.expireTime ? new Date(timestampMs(l.expireTime)).toISOString() : null,
    ttlMs: l.ttlMs,
  };
}

/**
 * Acquires with a client-chosen ticket (acquireWithTicket, the client
 * library's: it keeps the request's place in the queue across a
 * coordinator restart). On a terminal, the wait shows the request's place
 * in the queue (progress/lease-wait.ts).
 */
async function acquire(input: SessionInput & { opts: Selector; ctx: CommandContext }): Promise<{ lease: Lease; token: string }> {
  // A wait's deadline is --wait, not --timeout.
  const session = clientSession({ ...input, opts: { ...input.opts, timeout: undefined } });
  // The wait takes the stop signal itself; the release of a lease granted as it came must still go out.
  const client = serviceClient(LeaseService, { ...session.config, stopSignal: undefined });
  const { wait: waitMs, ttl: ttlMs } = input.opts;
  const selector = selectorOf(input.opts);
  const ticket = randomUUID();
  const deadline = Date.now() + waitMs;
  const following = waitMs > 0 ? await followQueue(input.ctx, client, ticket) : undefined;
  // SIGINT/SIGTERM cancel the call: the coordinator drops the request from its queue.
  const stopped = () => new CliError(Errors.LEASE_WAIT_CANCELLED, "stopped by a signal while waiting for a device; nothing is leased or queued", undefined, null);
  try {
    return await acquireWithTicket(client, { selector, waitMs, ttlMs, ticket, deadline }, { signal: input.ctx.stopSignal, stopped });
  } finally {
    await following?.stop();
  }
}

export const acquireLease: Action<typeof acquireOptions> = async (input) => {
  const { lease, token } = await acquire(input);
  input.ctx.printer.result(
    { lease: leaseJson(lease, token) },
    () => [`leased ${lease.physicalId} via ${lease.agentName}/${lease.serial} until ${leaseJson(lease)?.expiresAt}`, `export FARM_LEASE=${token} FARM_DEVICE=${lease.serial}`].join("\n"),
  );
  return 0;
};

function tokenOf(lease: string | undefined): string {
  if (!lease) throw new CliError(Errors.INVALID_ARGUMENT, "--lease TOKEN is required (or FARM_LEASE)", "lease");
  return lease;
}

export const renewLease: Action<typeof renewOptions> = async (input) => {
  const session = clientSession(input);
  const res = await serviceClient(LeaseService, session.config).renewLease({ token: tokenOf(input.opts.lease), ttlMs: input.opts.ttl ?? 0 }, { timeoutMs: session.timeoutMs });
  input.ctx.printer.result({ lease: leaseJson(res.lease) }, () => `renewed until ${leaseJson(res.lease)?.expiresAt}`);
  return 0;
};

export const releaseLease: Action<typeof releaseOptions> = async (input) => {
  const session = clientSession(input);
  const res = await serviceClient(LeaseService, session.config).releaseLease({ token: tokenOf(input.opts.lease) }, { timeoutMs: session.timeoutMs });
  input.ctx.printer.result({ lease: leaseJson(res.lease) }, () => `released ${res.lease?.physicalId}`);
  return 0;
};

export const listLeases: Action<typeof leaseListOptions> = async (input) => {
  const session = clientSession(input);
  const client = serviceClient(LeaseService, session.config);
  // Leases across every page; the queue comes whole with the first page.
  let waiters: LeaseWaiter[] = [];
  const rows = await allPages(async (page) => {
    const res = await client.listLeases(page, { timeoutMs: session.timeoutMs });
    if (page.pageToken === "") waiters = res.queue;
    return { items: res.leases, nextPageToken: res.nextPageToken };
  });
  const leases = rows.map((l) => leaseJson(l));
  const queue = waiters.map((w) => ({
    ticket: w.ticket,
    holder: w.holder,
    selector: w.selector,
    since: w.enqueueTime ? new Date(timestampMs(w.enqueueTime)).toISOString() : null,
    waitUntil: w.waitDeadline ? new Date(timestampMs(w.waitDeadline)).toISOString() : null,
  }));
  const wide = input.ctx.printer.wide;
  input.ctx.printer.result({ leases, queue }, () =>
    [
      table(
        ["HOLDER", "DEVICE", "ROUTE", "SINCE", "EXPIRES", ...(wide ? ["TTL", "LEASE", "AGENT ID"] : [])],
        leases.map((l) => [l?.holder ?? "", l?.physicalId ?? "", `${l?.agentName}/${l?.serial}`, l?.acquiredAt ?? "", l?.expiresAt ?? "", ...(wide ? [`${Math.round((l?.ttlMs ?? 0) / 1000)}s`, l?.leaseId ?? "", l?.agentId ?? ""] : [])]),
      ),
      "",
      `queue: ${queue.length}`,
      ...queue.map((q, i) => `  ${i + 1}. ${q.holder} since ${q.since}, waits until ${q.waitUntil}${wide ? ` (ticket ${q.ticket})` : ""}`),
    ].join("\n"));
  return 0;
};

/** `farm lease run [selectors] [--] COMMAND...`: the command's words come after its first one, flags included. */
export const runLeased: Action<typeof runOptions> = async (input) => {
  const [cmd, ...args] = input.args as [string, ...string[]];
  if (!input.opts.session && (input.opts.policy || input.opts.secret.length > 0)) throw new CliError(Errors.INVALID_ARGUMENT, "--policy and --secret go with --session", "policy");
  // A bad policy or a missing secret fails before a device is leased.
  const policy = input.opts.session ? await sessionPolicyInput(input.opts.policy, input.opts.secret, input.ctx.env) : undefined;
  // A summary file that cannot be written, or an export dir that cannot be made, is refused before a device is leased.
  const summaryFile = input.opts.summary === undefined ? undefined : await summaryPath(input.opts.summary);
  if (input.opts.export !== undefined && !input.opts.session) throw new CliError(Errors.INVALID_ARGUMENT, "--export goes with --session", "export");
  const exportDir = input.opts.export === undefined ? undefined : exportDirOf(input.opts.export);
  const { lease, token } = await acquire(input);
  // Once leased, nothing here is cancelled by a signal: the signal goes to the command, and
  // ending the session and releasing the lease must still happen on the way out.
  const stoppable = clientSession(input);
  const session = { ...stoppable, config: { ...stoppable.config, stopSignal: undefined } };
  const client = serviceClient(LeaseService, session.config);
  const renewEvery = Math.max(500, Math.floor(lease.ttlMs / 3));
  const timer = setInterval(() => {
    client.renewLease({ token }, { timeoutMs: renewEvery }).catch((err: unknown) => {
      input.ctx.writeErr(`farm lease run: renewing failed: ${toErrorReport(err).message}\n`);
    });
  }, renewEvery);
  input.ctx.writeErr(`farm lease run: leased ${lease.physicalId} via ${lease.agentName}/${lease.serial}\n`);
  let sessionId: string | undefined;
  if (input.opts.session) {
    try {
      const s = await startSessionOn(session, { serial: lease.serial, agent: lease.agentId, lease: token }, { name: input.opts.sessionName, ...(policy ? { policy } : {}) });
      sessionId = s.sessionId;
      input.ctx.writeErr(`farm lease run: session ${sessionId}\n`);
    } catch (err) {
      // No session, no command: give the device back at once rather than at expiry.
      clearInterval(timer);
      await client.releaseLease({ token }, { timeoutMs: 10_000 }).catch(() => undefined);
      throw err;
    }
  }
  if (input.ctx.stopSignal.aborted) {
    // Stopped before the command started: nothing to run, the phone goes back now.
    clearInterval(timer);
    if (sessionId !== undefined) await endSessionAs(session, sessionId, "failed", 10_000).catch(() => undefined);
    await client.releaseLease({ token }, { timeoutMs: 10_000 }).catch(() => undefined);
    throw new CliError(Errors.LEASE_WAIT_CANCELLED, "stopped by a signal before the command started; the lease is released", undefined, null);
  }
  const sessionEnv = sessionId === undefined ? {} : { FARM_SESSION: sessionId };
  const child = spawn(cmd, args, { stdio: "inherit", env: { ...input.ctx.env, FARM_LEASE: token, FARM_DEVICE: lease.serial, FARM_LEASE_ID: lease.leaseId, ...sessionEnv } });
  // Signals go to the command; the lease is released when it ends.
  const forward = (sig: NodeJS.Signals) => () => child.kill(sig);
  const onInt = forward("SIGINT");
  const onTerm = forward("SIGTERM");
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  let endedBy: NodeJS.Signals | undefined;
  const code = await new Promise<number>((resolve) => {
    child.once("error", (err) => {
      input.ctx.writeErr(`farm lease run: cannot run ${cmd}: ${err.message}\n`);
      resolve(127);
    });
    child.once("exit", (c, signal) => {
      endedBy = signal ?? undefined;
      resolve(c ?? (signal ? 128 + (signalNumber(signal) ?? 1) : 1));
    });
  });
  process.off("SIGINT", onInt);
  process.off("SIGTERM", onTerm);
  clearInterval(timer);
  // Ended before the release: releasing first would end it as lease-ended.
  let sessionStatus: string | undefined;
  if (sessionId !== undefined) {
    const status = code === 0 ? "passed" : "failed";
    try {
      await endSessionAs(session, sessionId, status, 10_000);
      sessionStatus = status;
      input.ctx.writeErr(`farm lease run: session ${sessionId} ${status}\n`);
    } catch (err) {
      input.ctx.writeErr(`farm lease run: ending session ${sessionId} failed (releasing the lease ends it as lease-ended): ${toErrorReport(err).message}\n`);
    }
  }
  // The summary's facts are read while the lease is still held; the release comes last whatever they say.
  // On stdout only when JSON was asked for: a CI job piping its command's output (JSON by default off a terminal) gets that output alone.
  const summaryOnStdout = input.ctx.printer.format === "json" && input.ctx.formatChosen === true;
  const wantSummary = summaryFile !== undefined || summaryOnStdout;
  const facts = wantSummary ? await summaryFacts(session, lease, sessionId, (what, err) => input.ctx.writeErr(`farm lease run: ${what} for the summary failed: ${toErrorReport(err).message}\n`)) : undefined;
  try {
    await client.releaseLease({ token }, { timeoutMs: 10_000 });
  } catch (err) {
    input.ctx.writeErr(`farm lease run: release failed (the lease will expire by itself): ${toErrorReport(err).message}\n`);
  }
  const exportPath = exportDir !== undefined && sessionId !== undefined ? await exportAfter(input, sessionId, exportDir) : undefined;
  if (facts) {
    const summary = leaseRunSummary({ lease, ...facts, sessionId, sessionStatus, exitCode: code, exportPath, signal: endedBy });
    if (summaryFile !== undefined) {
      try {
        await writeSummaryFile(summaryFile, summary);
      } catch (err) {
        input.ctx.writeErr(`farm lease run: writing the summary to ${summaryFile} failed: ${(err as Error).message}\n`);
      }
    }
    // The command's exit code stays the CLI's, so the summary is data, not a failure envelope;
    // for people it is one more stderr line, keeping stdout the command's own.
    if (summaryOnStdout) input.ctx.printer.emit({ ...summary }, () => "");
    else input.ctx.writeErr(`${summaryLine(summary)}\n`);
  }
  return code;
};

/** --export's directory, checked as every evidence output dir is (new, its parent there), a relative one against the working directory. */
function exportDirOf(given: string): string {
  try {
    return validateOutputDir(resolve(given));
  } catch (err) {
    const r = toErrorReport(err);
    throw new CliError(errorSpecOf(r.code) ?? Errors.INVALID_ARGUMENT, `--export: ${r.message}`, "export");
  }
}

/**
 * `--export DIR`: the ended session exported as `farm session export` does,
 * after the release (the phone is not held for it). Its own result line is
 * not printed; the path goes into the summary. A failed export is a line on
 * stderr and no path: the command's exit code stays the CLI's.
 */
async function exportAfter(input: Parameters<typeof runLeased>[0], sessionId: string, dir: string): Promise<string | undefined> {
  const { exportSession } = await import("./session-export.js");
  const quiet = createPrinter("json", () => undefined, () => undefined);
  try {
    const code = await exportSession({ ...input, args: [sessionId, dir], opts: { ...input.opts, outputDir: undefined }, ctx: { ...input.ctx, printer: quiet } });
    if (code === 0 && !quiet.failed) {
      input.ctx.writeErr(`farm lease run: session ${sessionId} exported to ${dir}\n`);
      return join(dir, "manifest.json");
    }
    input.ctx.writeErr(`farm lease run: exporting session ${sessionId} to ${dir} failed (exit ${code})\n`);
  } catch (err) {
    input.ctx.writeErr(`farm lease run: exporting session ${sessionId} to ${dir} failed: ${toErrorReport(err).message}\n`);
  }
  return undefined;
}

/** The phone's model and the session's steps, each null when it could not be read (unknown stays unknown). */
async function summaryFacts(
  session: ReturnType<typeof clientSession>,
  lease: Lease,
  sessionId: string | undefined,
  warn: (what: string, err: unknown) => void,
): Promise<{ model: string | undefined; steps: Awaited<ReturnType<typeof listAllSteps>> | undefined }> {
  let model: string | undefined;
  try {
    const registry = serviceClient(RegistryService, session.config);
    const devices = await allPages(async (page) => {
      const res = await registry.listDevices({ agent: "", ...page }, { timeoutMs: 10_000 });
      return { items: res.devices, nextPageToken: res.nextPageToken };
    });
    const found = devices.find((d) => d.agentId === lease.agentId && d.serial === lease.serial)?.properties?.model;
    model = found === "" ? undefined : found;
  } catch (err) {
    warn("reading the phone's model", err);
  }
  let steps: Awaited<ReturnType<typeof listAllSteps>> | undefined;
  if (sessionId !== undefined) {
    try {
      steps = await listAllSteps(session, sessionId);
    } catch (err) {
      warn("reading the session's steps", err);
    }
  }
  return { model, steps };
}

function signalNumber(sig: NodeJS.Signals): number | undefined {
  return ({ SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 } as Record<string, number>)[sig];
}
