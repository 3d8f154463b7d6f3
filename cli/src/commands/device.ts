import { create, toJson } from "@bufbuild/protobuf";
import { Errors, farmError, NOT_DISPATCHED } from "@farm/shared/errors";
import { CliError } from "../cli-error.js";
import { ActionRecordSchema, DeviceService, DeviceTargetSchema, OwnershipSchema, SwipeSchema, TapSchema, type ActionRecord, type DeviceTarget, type SendInputRequest } from "@farm/shared/gen/farm/v1/device_service_pb";
import { intFlag, parseFlags, requiredString, stringFlag, type Parsed } from "../args.js";
import { labelGroup } from "./label.js";
import { aliasGroup } from "./device-alias.js";
import { existsSync } from "node:fs";
import { BlobService } from "@farm/shared/gen/farm/v1/blob_service_pb";
import { downloadFile, uploadFile } from "../blob-client.js";
import { serviceClient } from "../client.js";
import { deviceOptions, type Command, type CommandContext, type CommandGroup } from "../command.js";
import { table } from "../output.js";
import { clientSession, type ClientSession } from "../session.js";

/** --device, else FARM_DEVICE (set by `farm lease run`). */
function target(parsed: Parsed, env: NodeJS.ProcessEnv): DeviceTarget {
  const serial = stringFlag(parsed, "device") || env["FARM_DEVICE"] || "";
  if (!serial) throw new CliError(Errors.INVALID_ARGUMENT, "--device is required (or FARM_DEVICE)", "device");
  return create(DeviceTargetSchema, { serial, agent: stringFlag(parsed, "agent") ?? "", requestId: stringFlag(parsed, "request-id") ?? "" });
}

/** A device client presenting --lease, else FARM_LEASE. */
function open(ctx: CommandContext, parsed: Parsed): { client: ReturnType<typeof serviceClient<typeof DeviceService>>; session: ClientSession } {
  const session = clientSession(ctx, parsed);
  const lease = stringFlag(parsed, "lease") || ctx.env["FARM_LEASE"] || undefined;
  return { client: serviceClient(DeviceService, session.config, { lease }), session };
}

/**
 * A command that changes a device: any failure it meets before the
 * coordinator answered (a bad flag, a missing device) is reported with what
 * is known, that nothing was dispatched.
 */
function mutation(cmd: Command): Command {
  return {
    ...cmd,
    async run(ctx) {
      try {
        return await cmd.run.call(this, ctx);
      } catch (err) {
        if (err instanceof CliError) throw farmError(err.spec, err.message, err.field, NOT_DISPATCHED);
        throw err;
      }
    },
  };
}

const recordJson = (a: ActionRecord) => toJson(ActionRecordSchema, a, { alwaysEmitImplicit: true });

function actionLine(a: ActionRecord): string[] {
  const dispatched = a.dispatched === undefined ? "unknown" : a.dispatched ? "yes" : "no";
  return [a.actionId, a.kind, a.state, dispatched, a.settledBy || a.abandonReason || a.errorMessage];
}

const shell: Command = mutation({
  name: "shell",
  summary: "Run a shell command on a device (a journaled mutation)",
  usage: "farm device shell --device SERIAL [--agent NAME] [-- COMMAND...]   (no command: an interactive terminal)",
  options: deviceOptions,
  positionals: true,
  async run(ctx) {
    const dash = ctx.args.indexOf("--");
    const parsed = parseFlags(dash < 0 ? ctx.args : ctx.args.slice(0, dash), this.options, true);
    const words = dash < 0 ? parsed.positionals : [...parsed.positionals, ...ctx.args.slice(dash + 1)];
    const { client, session } = open(ctx, parsed);
    if (words.length === 0) {
      const { runInteractiveShell } = await import("../interactive-shell.js");
      return runInteractiveShell(session.config, target(parsed, ctx.env), stringFlag(parsed, "lease") || ctx.env["FARM_LEASE"] || undefined);
    }
    const res = await client.runShell({ target: target(parsed, ctx.env), command: words.join(" ") }, { timeoutMs: session.timeoutMs });
    const stdout = Buffer.from(res.stdout).toString("utf8");
    const stderr = Buffer.from(res.stderr).toString("utf8");
    ctx.printer.result({ actionId: res.actionId, exitCode: res.exitCode, stdout, stderr, dispatched: res.dispatched ?? null, ambiguous: res.ambiguous }, () => {
      if (stderr) process.stderr.write(stderr);
      return stdout.replace(/\n$/, "");
    });
    return res.exitCode === 0 ? 0 : Math.min(255, Math.max(1, res.exitCode));
  },
});

const setprop: Command = mutation({
  name: "setprop",
  summary: "Set a system property on a device (a journaled mutation)",
  usage: "farm device setprop --device SERIAL KEY VALUE",
  options: deviceOptions,
  positionals: true,
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options, true);
    const [key, value, ...extra] = parsed.positionals;
    if (key === undefined || value === undefined || extra.length > 0) throw new CliError(Errors.INVALID_ARGUMENT, "expected KEY VALUE", "key");
    const { client, session } = open(ctx, parsed);
    const res = await client.setProperty({ target: target(parsed, ctx.env), key, value }, { timeoutMs: session.timeoutMs });
    ctx.printer.result({ actionId: res.actionId, dispatched: res.dispatched ?? null, ambiguous: res.ambiguous }, () => `${key} set (action ${res.actionId})`);
    return 0;
  },
});

const pin: Command = {
  name: "pin",
  summary: "Pin a phone apart from others with the same identity (admin)",
  usage: "farm device pin --device SERIAL --label LABEL   (--label '' removes the pin)",
  options: { ...deviceOptions, label: { type: "string" } },
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const label = stringFlag(parsed, "label");
    if (label === undefined) throw new CliError(Errors.INVALID_ARGUMENT, "--label is required", "label");
    const { client, session } = open(ctx, parsed);
    const res = await client.pinIdentity({ target: target(parsed, ctx.env), label }, { timeoutMs: session.timeoutMs });
    ctx.printer.result({ physicalId: res.physicalId }, () => `pinned; physical id now ${res.physicalId}`);
    return 0;
  },
};

const status: Command = {
  name: "status",
  summary: "Show who holds a device and its unresolved actions",
  usage: "farm device ownership status --device SERIAL",
  options: deviceOptions,
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const { client, session } = open(ctx, parsed);
    const res = await client.getOwnership({ target: target(parsed, ctx.env) }, { timeoutMs: session.timeoutMs });
    const o = res.ownership;
    ctx.printer.result({ ownership: o ? toJson(OwnershipSchema, o, { alwaysEmitImplicit: true }) : null }, () =>
      o
        ? [
            `physical id  ${o.physicalId}  (${o.identityStatus}; aliases: ${o.aliases.join(", ")})`,
            `lock         ${o.locked ? `held by ${o.holder}` : "free"}`,
            `unresolved   ${o.unresolved.length}`,
            "",
            table(["ACTION", "KIND", "STATE", "DISPATCHED", "NOTE"], [...o.unresolved, ...o.recent.filter((r) => !o.unresolved.some((u) => u.actionId === r.actionId))].map(actionLine)),
          ].join("\n")
        : "no ownership information",
    );
    return o && o.unresolved.length > 0 ? 1 : 0;
  },
};

const reconcile: Command = {
  name: "reconcile",
  summary: "Settle unresolved actions that can be proven; never replays them",
  usage: "farm device ownership reconcile --device SERIAL",
  options: deviceOptions,
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const { client, session } = open(ctx, parsed);
    const res = await client.reconcileOwnership({ target: target(parsed, ctx.env) }, { timeoutMs: session.timeoutMs });
    ctx.printer.result({ settled: res.settled.map(recordJson), unresolved: res.unresolved.map(recordJson) }, () =>
      [`settled by proof: ${res.settled.length}`, `still unresolved: ${res.unresolved.length}`, "", table(["ACTION", "KIND", "STATE", "DISPATCHED", "NOTE"], [...res.settled, ...res.unresolved].map(actionLine))].join("\n"),
    );
    return res.unresolved.length > 0 ? 1 : 0;
  },
};

const receipt: Command = {
  name: "receipt",
  summary: "Read a retained action record",
  usage: "farm device ownership receipt --device SERIAL --action-id ID",
  options: { ...deviceOptions, "action-id": { type: "string" } },
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const { client, session } = open(ctx, parsed);
    const res = await client.getActionReceipt({ target: target(parsed, ctx.env), actionId: requiredString(parsed, "action-id") }, { timeoutMs: session.timeoutMs });
    const a = res.action;
    ctx.printer.result({ action: a ? recordJson(a) : null }, () => (a ? JSON.stringify(recordJson(a), null, 2) : "not found"));
    return 0;
  },
};

const abandon: Command = {
  name: "abandon",
  summary: "Accept an unknown outcome (admin, audit-logged, never 'settled')",
  usage: "farm device ownership abandon --device SERIAL --action-id ID --reason TEXT",
  options: { ...deviceOptions, "action-id": { type: "string" }, reason: { type: "string" } },
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const { client, session } = open(ctx, parsed);
    const res = await client.abandonAction(
      { target: target(parsed, ctx.env), actionId: requiredString(parsed, "action-id"), reason: requiredString(parsed, "reason") },
      { timeoutMs: session.timeoutMs },
    );
    ctx.printer.result({ action: res.action ? recordJson(res.action) : null }, () => `action ${res.action?.actionId} abandoned`);
    return 0;
  },
};

const props: Command = {
  name: "props",
  summary: "Show a device's system properties (a read)",
  usage: "farm device props [--device SERIAL]",
  options: deviceOptions,
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const { client, session } = open(ctx, parsed);
    const res = await client.getProperties({ target: target(parsed, ctx.env) }, { timeoutMs: session.timeoutMs });
    const sorted = Object.fromEntries(Object.entries(res.properties).sort(([a], [b]) => (a < b ? -1 : 1)));
    ctx.printer.result({ properties: sorted }, () => Object.entries(sorted).map(([k, v]) => `[${k}]: [${v}]`).join("\n"));
    return 0;
  },
};

export const logcatCommand: Command = {
  name: "logcat",
  summary: "Read a device's log (the last lines, or since a time)",
  usage: "farm logcat [--device SERIAL] [--lines N] [--since 'MM-DD HH:MM:SS.mmm']",
  options: { ...deviceOptions, lines: { type: "string" }, since: { type: "string" } },
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const { client, session } = open(ctx, parsed);
    const res = await client.readLogcat(
      { target: target(parsed, ctx.env), lines: intFlag(parsed, "lines", 1, 10_000) ?? 0, since: stringFlag(parsed, "since") ?? "" },
      { timeoutMs: session.timeoutMs },
    );
    ctx.printer.result({ text: res.text, truncated: res.truncated }, () => res.text.replace(/\n$/, ""));
    return 0;
  },
};

export const inputCommand: Command = mutation({
  name: "input",
  summary: "Send input: tap X Y | swipe X1 Y1 X2 Y2 [MS] | text STRING | key CODE",
  usage: "farm input [--device SERIAL] tap X Y | swipe X1 Y1 X2 Y2 [MS] | text STRING | key CODE",
  options: deviceOptions,
  positionals: true,
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options, true);
    const [what, ...rest] = parsed.positionals;
    const num = (v: string | undefined, field: string) => {
      if (v === undefined || !/^\d{1,5}$/.test(v)) throw new CliError(Errors.INVALID_ARGUMENT, `${field} must be a non-negative integer`, field);
      return Number(v);
    };
    let kind: SendInputRequest["kind"];
    if (what === "tap" && rest.length === 2) kind = { case: "tap", value: create(TapSchema, { x: num(rest[0], "x"), y: num(rest[1], "y") }) };
    else if (what === "swipe" && (rest.length === 4 || rest.length === 5)) {
      kind = { case: "swipe", value: create(SwipeSchema, { x1: num(rest[0], "x1"), y1: num(rest[1], "y1"), x2: num(rest[2], "x2"), y2: num(rest[3], "y2"), durationMs: rest[4] === undefined ? 0 : num(rest[4], "duration") }) };
    } else if (what === "text" && rest.length >= 1) kind = { case: "text", value: rest.join(" ") };
    else if (what === "key" && rest.length === 1) kind = { case: "key", value: rest[0] as string };
    else throw new CliError(Errors.INVALID_ARGUMENT, `usage: ${this.usage}`, "input");
    const { client, session } = open(ctx, parsed);
    const res = await client.sendInput({ target: target(parsed, ctx.env), kind }, { timeoutMs: session.timeoutMs });
    ctx.printer.result({ actionId: res.actionId, dispatched: res.dispatched ?? null, ambiguous: res.ambiguous }, () => `sent (action ${res.actionId})`);
    return 0;
  },
});

export const rebootCommand: Command = mutation({
  name: "reboot",
  summary: "Reboot a device (a journaled mutation; proven later by a new boot id)",
  usage: "farm reboot [--device SERIAL]",
  options: deviceOptions,
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const { client, session } = open(ctx, parsed);
    const res = await client.reboot({ target: target(parsed, ctx.env) }, { timeoutMs: session.timeoutMs });
    ctx.printer.result({ actionId: res.actionId, dispatched: res.dispatched ?? null, ambiguous: res.ambiguous }, () => `rebooting (action ${res.actionId})`);
    return 0;
  },
});

export const screenshotCommand: Command = {
  name: "screenshot",
  summary: "Save a verified PNG screenshot of a device (a read)",
  usage: "farm screenshot [--device SERIAL] --output FILE.png",
  options: { ...deviceOptions, output: { type: "string" } },
  async run(ctx) {
    // `--output json|pretty` is the format; any other --output value is the file.
    const parsed = parseFlags(ctx.args, this.options);
    const file = stringFlag(parsed, "output");
    if (!file) throw new CliError(Errors.INVALID_ARGUMENT, "--output FILE.png is required", "output");
    if (existsSync(file)) throw new CliError(Errors.EVIDENCE_OUTPUT_EXISTS, `${file} already exists`, "output");
    const { client, session } = open(ctx, parsed);
    const shot = await client.takeScreenshot({ target: target(parsed, ctx.env) }, { timeoutMs: session.timeoutMs });
    const blobs = serviceClient(BlobService, session.config);
    await downloadFile(blobs, shot.blobId, file);
    ctx.printer.result({ file, width: shot.width, height: shot.height, bytes: Number(shot.size), sha256: shot.sha256 }, () => `${file}: ${shot.width}x${shot.height}, ${shot.size} bytes`);
    return 0;
  },
};

export const installCommand: Command = mutation({
  name: "install",
  summary: "Install an APK on a device (streamed upload; a journaled mutation)",
  usage: "farm install [--device SERIAL] APP.apk",
  options: deviceOptions,
  positionals: true,
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options, true);
    const [apk, ...extra] = parsed.positionals;
    if (!apk || extra.length > 0) throw new CliError(Errors.INVALID_ARGUMENT, "expected one APP.apk", "file");
    const { client, session } = open(ctx, parsed);
    const t = target(parsed, ctx.env);
    const blobId = await uploadFile(serviceClient(BlobService, session.config), apk);
    const res = await client.installApp({ target: t, blobId }, { timeoutMs: Math.max(session.timeoutMs, 120_000) });
    ctx.printer.result({ actionId: res.actionId, output: res.output, dispatched: res.dispatched ?? null, ambiguous: res.ambiguous }, () => res.output);
    return 0;
  },
});

export const deviceGroup: CommandGroup = {
  name: "device",
  summary: "Act on one device: shell, setprop, pin, ownership, label, alias",
  commands: [
    shell,
    setprop,
    props,
    inputCommand,
    logcatCommand,
    rebootCommand,
    pin,
    { name: "ownership", summary: "Device ownership: status, reconcile, receipt, abandon", commands: [status, reconcile, receipt, abandon] },
    labelGroup,
    aliasGroup,
  ],
};

/** `farm shell`: the same command at top level, for use inside `farm lease run`. */
export const shellCommand: Command = { ...shell, usage: "farm shell [--device SERIAL] [-- COMMAND...]   (no command: an interactive terminal)" };
