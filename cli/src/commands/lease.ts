import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { Errors, toErrorReport } from "@farm/shared/errors";
import { CliError } from "../cli-error.js";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { LeaseSelectorSchema, type Lease, type LeaseSelector, type LeaseWaiter } from "@farm/shared/gen/farm/v1/lease_pb";
import { allPages } from "../all-pages.js";
import { parseFlags, stringFlag, type OptionSpec, type Parsed } from "../args.js";
import { serviceClient } from "../client.js";
import { clientOptions, type Command, type CommandContext, type CommandGroup } from "../command.js";
import { parseDuration } from "../duration.js";
import { table } from "../output.js";
import { clientSession } from "../session.js";
import { parseLabels } from "./label.js";

const selectorOptions: OptionSpec = {
  device: { type: "string" },
  "physical-id": { type: "string" },
  label: { type: "string", multiple: true },
  model: { type: "string" },
  "api-level": { type: "string" },
  agent: { type: "string" },
  wait: { type: "string" },
  ttl: { type: "string" },
};

function selectorOf(parsed: Parsed): LeaseSelector {
  const api = stringFlag(parsed, "api-level");
  let min = 0;
  let max = 0;
  if (api !== undefined) {
    const m = /^(\d+)(?:\.\.(\d+))?$/.exec(api);
    if (!m) throw new CliError(Errors.INVALID_ARGUMENT, `--api-level must be MIN or MIN..MAX, got "${api}"`, "api-level");
    min = Number(m[1]);
    max = m[2] ? Number(m[2]) : 0;
  }
  const labels = parsed.values["label"];
  return create(LeaseSelectorSchema, {
    serial: stringFlag(parsed, "device") ?? "",
    physicalId: stringFlag(parsed, "physical-id") ?? "",
    labels: parseLabels(Array.isArray(labels) ? labels : []),
    model: stringFlag(parsed, "model") ?? "",
    apiLevelMin: min,
    apiLevelMax: max,
    agent: stringFlag(parsed, "agent") ?? "",
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
 * Acquires with a client-chosen ticket; if the coordinator goes away while
 * waiting (a restart), asks again with the same ticket until the wait ends,
 * which keeps the request's place in the queue.
 */
async function acquire(ctx: CommandContext, parsed: Parsed): Promise<{ lease: Lease; token: string }> {
  const session = clientSession(ctx, { ...parsed, values: { ...parsed.values, timeout: undefined } });
  const client = serviceClient(LeaseService, session.config);
  const waitMs = parseDuration(stringFlag(parsed, "wait") ?? "0", "wait");
  const ttlMs = parseDuration(stringFlag(parsed, "ttl") ?? "5m", "ttl");
  const selector = selectorOf(parsed);
  const ticket = randomUUID();
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      const res = await client.acquireLease(
        { selector, waitMs: Math.max(0, deadline - Date.now()), ttlMs, ticket },
        { timeoutMs: Math.max(0, deadline - Date.now()) + 30_000 },
      );
      if (!res.lease) throw new CliError(Errors.INTERNAL, "the coordinator granted no lease");
      return { lease: res.lease, token: res.token };
    } catch (err) {
      const unavailable = ConnectError.from(err).code === Code.Unavailable && toErrorReport(err).code === Errors.COORDINATOR_UNAVAILABLE.code;
      if (!unavailable || Date.now() >= deadline) throw err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

const acquireCommand: Command = {
  name: "acquire",
  summary: "Lease a device; prints the lease id, token, device and expiry",
  usage: "farm lease acquire [--device SERIAL | --physical-id ID | --label k=v ... | --model M | --api-level MIN[..MAX] | --agent NAME] [--wait 5m] [--ttl 5m]",
  options: { ...clientOptions, ...selectorOptions },
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const { lease, token } = await acquire(ctx, parsed);
    ctx.printer.result({ lease: leaseJson(lease, token) }, () =>
      [`leased ${lease.physicalId} via ${lease.agentName}/${lease.serial} until ${leaseJson(lease)?.expiresAt}`, `export FARM_LEASE=${token} FARM_DEVICE=${lease.serial}`].join("\n"),
    );
    return 0;
  },
};

function tokenOf(ctx: CommandContext, parsed: Parsed): string {
  const t = stringFlag(parsed, "lease") || ctx.env["FARM_LEASE"];
  if (!t) throw new CliError(Errors.INVALID_ARGUMENT, "--lease TOKEN is required (or FARM_LEASE)", "lease");
  return t;
}

const renew: Command = {
  name: "renew",
  summary: "Extend a lease before it expires",
  usage: "farm lease renew [--lease TOKEN] [--ttl 5m]",
  options: { ...clientOptions, lease: { type: "string" }, ttl: { type: "string" } },
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const session = clientSession(ctx, parsed);
    const ttl = stringFlag(parsed, "ttl");
    const res = await serviceClient(LeaseService, session.config).renewLease({ token: tokenOf(ctx, parsed), ttlMs: ttl ? parseDuration(ttl, "ttl") : 0 }, { timeoutMs: session.timeoutMs });
    ctx.printer.result({ lease: leaseJson(res.lease) }, () => `renewed until ${leaseJson(res.lease)?.expiresAt}`);
    return 0;
  },
};

const release: Command = {
  name: "release",
  summary: "Give a leased device back",
  usage: "farm lease release [--lease TOKEN]",
  options: { ...clientOptions, lease: { type: "string" } },
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const session = clientSession(ctx, parsed);
    const res = await serviceClient(LeaseService, session.config).releaseLease({ token: tokenOf(ctx, parsed) }, { timeoutMs: session.timeoutMs });
    ctx.printer.result({ lease: leaseJson(res.lease) }, () => `released ${res.lease?.physicalId}`);
    return 0;
  },
};

const list: Command = {
  name: "list",
  summary: "Active leases and the wait queue",
  usage: "farm lease list",
  options: clientOptions,
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const session = clientSession(ctx, parsed);
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
    ctx.printer.result({ leases, queue }, () =>
      [
        table(["HOLDER", "DEVICE", "ROUTE", "SINCE", "EXPIRES"], leases.map((l) => [l?.holder ?? "", l?.physicalId ?? "", `${l?.agentName}/${l?.serial}`, l?.acquiredAt ?? "", l?.expiresAt ?? ""])),
        "",
        `queue: ${queue.length}`,
        ...queue.map((q, i) => `  ${i + 1}. ${q.holder} since ${q.since}, waits until ${q.waitUntil}`),
      ].join("\n"),
    );
    return 0;
  },
};

const run: Command = {
  name: "run",
  summary: "Lease a device, run a command with FARM_LEASE and FARM_DEVICE, release on exit",
  usage: "farm lease run [selectors] [--wait 10m] [--ttl 2m] -- COMMAND...",
  options: { ...clientOptions, ...selectorOptions },
  positionals: true,
  async run(ctx) {
    const dash = ctx.args.indexOf("--");
    if (dash < 0 || dash === ctx.args.length - 1) throw new CliError(Errors.INVALID_ARGUMENT, "give the command after --", "command");
    const parsed = parseFlags(ctx.args.slice(0, dash), this.options);
    const [cmd, ...args] = ctx.args.slice(dash + 1) as [string, ...string[]];
    const { lease, token } = await acquire(ctx, parsed);
    const session = clientSession(ctx, parsed);
    const client = serviceClient(LeaseService, session.config);
    const renewEvery = Math.max(500, Math.floor(lease.ttlMs / 3));
    const timer = setInterval(() => {
      client.renewLease({ token }, { timeoutMs: renewEvery }).catch((err: unknown) => {
        process.stderr.write(`farm lease run: renewing failed: ${toErrorReport(err).message}\n`);
      });
    }, renewEvery);
    process.stderr.write(`farm lease run: leased ${lease.physicalId} via ${lease.agentName}/${lease.serial}\n`);
    const child = spawn(cmd, args, { stdio: "inherit", env: { ...ctx.env, FARM_LEASE: token, FARM_DEVICE: lease.serial, FARM_LEASE_ID: lease.leaseId } });
    // Signals go to the command; the lease is released when it ends.
    const forward = (sig: NodeJS.Signals) => () => child.kill(sig);
    const onInt = forward("SIGINT");
    const onTerm = forward("SIGTERM");
    process.on("SIGINT", onInt);
    process.on("SIGTERM", onTerm);
    const code = await new Promise<number>((resolve) => {
      child.once("error", (err) => {
        process.stderr.write(`farm lease run: cannot run ${cmd}: ${err.message}\n`);
        resolve(127);
      });
      child.once("exit", (c, signal) => resolve(c ?? (signal ? 128 + (signalNumber(signal) ?? 1) : 1)));
    });
    process.off("SIGINT", onInt);
    process.off("SIGTERM", onTerm);
    clearInterval(timer);
    try {
      await client.releaseLease({ token }, { timeoutMs: 10_000 });
    } catch (err) {
      process.stderr.write(`farm lease run: release failed (the lease will expire by itself): ${toErrorReport(err).message}\n`);
    }
    return code;
  },
};

function signalNumber(sig: NodeJS.Signals): number | undefined {
  return ({ SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 } as Record<string, number>)[sig];
}

export const leaseGroup: CommandGroup = {
  name: "lease",
  summary: "Leases: acquire, renew, release, list, run",
  commands: [acquireCommand, renew, release, list, run],
};
