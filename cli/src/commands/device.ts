import { existsSync } from "node:fs";
import { create, toJson } from "@bufbuild/protobuf";
import { exitCodeFor } from "@farm/shared/error-codes";
import { Errors } from "@farm/shared/errors";
import { ActionRecordSchema, OwnershipSchema, SwipeSchema, TapSchema, type ActionRecord, type SendInputRequest } from "@farm/shared/gen/farm/v1/device_service_pb";
import type { InstallResult, ScreenshotFile } from "@farm/client/device";
import { CliError } from "../cli-error.js";
import { table } from "../output.js";
import { startProgress, TransferMeter, type Progress } from "../progress/progress.js";
import type { abandonOptions, inputOptions, installOptions, logcatOptions, ownershipOptions, pinOptions, propsOptions, rebootOptions, receiptOptions, screenshotOptions, setpropOptions, shellOptions } from "../tree/device-commands.js";
import type { Action } from "../tree/spec.js";
import { asCli, deviceClient, deviceTarget, libraryDevice } from "./device-target.js";

const recordJson = (a: ActionRecord) => toJson(ActionRecordSchema, a, { alwaysEmitImplicit: true });

function actionLine(a: ActionRecord): string[] {
  const dispatched = a.dispatched === undefined ? "unknown" : a.dispatched ? "yes" : "no";
  return [a.actionId, a.kind, a.state, dispatched, a.settledBy || a.abandonReason || a.errorMessage];
}

/** `farm device shell` / `farm shell`: words after -- are the command; none opens a terminal. */
export const shell: Action<typeof shellOptions> = async (input) => {
  const { opts, args: words, ctx } = input;
  if (words.length === 0) {
    const { session } = deviceClient(input);
    const { runInteractiveShell } = await import("../interactive-shell.js");
    return runInteractiveShell(session, deviceTarget(opts), opts.lease || undefined);
  }
  const { device, call } = libraryDevice(input);
  const res = await asCli(device.shell(words.join(" "), call));
  const { stdout, stderr } = res;
  ctx.printer.result({ actionId: res.actionId, exitCode: res.exitCode, stdout, stderr, dispatched: res.dispatched, ambiguous: res.ambiguous }, () => {
    if (stderr) ctx.writeErr(stderr);
    return stdout.replace(/\n$/, "");
  });
  return res.exitCode === 0 ? 0 : Math.min(255, Math.max(1, res.exitCode));
};

export const setprop: Action<typeof setpropOptions> = async (input) => {
  const [key, value] = input.args as [string, string];
  const { device, call } = libraryDevice(input);
  const res = await asCli(device.setProperty(key, value, call));
  input.ctx.printer.result({ actionId: res.actionId, dispatched: res.dispatched, ambiguous: res.ambiguous }, () => `${key} set (action ${res.actionId})`);
  return 0;
};

export const pin: Action<typeof pinOptions> = async (input) => {
  const { device, call } = libraryDevice(input);
  const res = await asCli(device.pinIdentity(input.opts.label, call));
  input.ctx.printer.result({ physicalId: res.physicalId }, () => `pinned; physical id now ${res.physicalId}`);
  return 0;
};

/** Actions whose outcome is not known yet are farm's state, not a test's: 75, try again later (DEVICE_OWNERSHIP_UNRESOLVED). */
const unresolvedExit = exitCodeFor(Errors.DEVICE_OWNERSHIP_UNRESOLVED.code);

export const ownershipStatus: Action<typeof ownershipOptions> = async (input) => {
  const { device, call } = libraryDevice(input);
  const o = await asCli(device.ownership(call));
  input.ctx.printer.result({ ownership: o ? toJson(OwnershipSchema, o, { alwaysEmitImplicit: true }) : null }, () =>
    o
      ? [
        `physical id  ${o.physicalId}  (${o.identityStatus}; aliases: ${o.aliases.join(", ")})`,
        `lock         ${o.locked ? `held by ${o.holder}` : "free"}`,
        `waiting      ${o.waiting} (changes waiting for the lock)`,
        `unresolved   ${o.unresolved.length}`,
        "",
        table(["ACTION", "KIND", "STATE", "DISPATCHED", "NOTE"], [...o.unresolved, ...o.recent.filter((r) => !o.unresolved.some((u) => u.actionId === r.actionId))].map(actionLine)),
      ].join("\n")
      : "no ownership information");
  return o && o.unresolved.length > 0 ? unresolvedExit : 0;
};

export const reconcile: Action<typeof ownershipOptions> = async (input) => {
  const { device, call } = libraryDevice(input);
  const res = await asCli(device.reconcileOwnership(call));
  input.ctx.printer.result(
    { settled: res.settled.map(recordJson), unresolved: res.unresolved.map(recordJson) },
    () => [`settled by proof: ${res.settled.length}`, `still unresolved: ${res.unresolved.length}`, "", table(["ACTION", "KIND", "STATE", "DISPATCHED", "NOTE"], [...res.settled, ...res.unresolved].map(actionLine))].join("\n"),
  );
  return res.unresolved.length > 0 ? unresolvedExit : 0;
};

export const receipt: Action<typeof receiptOptions> = async (input) => {
  const { device, call } = libraryDevice(input);
  const a = await asCli(device.actionReceipt(input.opts.actionId, call));
  input.ctx.printer.result({ action: a ? recordJson(a) : null }, () => (a ? JSON.stringify(recordJson(a), null, 2) : "not found"));
  return 0;
};

export const abandon: Action<typeof abandonOptions> = async (input) => {
  const { device, call } = libraryDevice(input);
  const action = await asCli(device.abandonAction(input.opts.actionId, input.opts.reason, call));
  input.ctx.printer.result({ action: action ? recordJson(action) : null }, () => `action ${action?.actionId} abandoned`);
  return 0;
};

export const props: Action<typeof propsOptions> = async (input) => {
  const { device, call } = libraryDevice(input);
  const properties = await asCli(device.properties(call));
  const sorted = Object.fromEntries(Object.entries(properties).sort(([a], [b]) => (a < b ? -1 : 1)));
  input.ctx.printer.result({ properties: sorted }, () => Object.entries(sorted).map(([k, v]) => `[${k}]: [${v}]`).join("\n"));
  return 0;
};

export const logcat: Action<typeof logcatOptions> = async (input) => {
  const { device, call } = libraryDevice(input);
  const res = await asCli(device.readLogcat({ lines: input.opts.lines, since: input.opts.since }, call));
  input.ctx.printer.result({ text: res.text, truncated: res.truncated }, () => res.text.replace(/\n$/, ""));
  return 0;
};

const INPUT_USAGE = "farm input [--device SERIAL] tap X Y | swipe X1 Y1 X2 Y2 [MS] | text STRING | key CODE";

export const input: Action<typeof inputOptions> = async (inp) => {
  const [what, ...rest] = inp.args;
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
  else throw new CliError(Errors.INVALID_ARGUMENT, `usage: ${INPUT_USAGE}`, "input");
  const { device, call } = libraryDevice(inp);
  const res = await asCli(device.sendInput(kind, call));
  inp.ctx.printer.result({ actionId: res.actionId, dispatched: res.dispatched ?? null, ambiguous: res.ambiguous }, () => `sent (action ${res.actionId})`);
  return 0;
};

export const reboot: Action<typeof rebootOptions> = async (input) => {
  const { device, call } = libraryDevice(input);
  const res = await asCli(device.reboot(call));
  input.ctx.printer.result({ actionId: res.actionId, dispatched: res.dispatched, ambiguous: res.ambiguous }, () => `rebooting (action ${res.actionId})`);
  return 0;
};

/** FILE, or the old `--output FILE`; one of them, once. */
export const screenshot: Action<typeof screenshotOptions> = async (input) => {
  const [positional] = input.args;
  const { outputFile } = input.opts;
  if (positional !== undefined && outputFile !== undefined) throw new CliError(Errors.INVALID_ARGUMENT, "give the file once: FILE or --output FILE", "output");
  const file = positional ?? outputFile;
  if (!file) throw new CliError(Errors.INVALID_ARGUMENT, "a FILE.png to write is required", "output");
  if (existsSync(file)) throw new CliError(Errors.EVIDENCE_OUTPUT_EXISTS, `${file} already exists`, "output");
  const { device, call } = libraryDevice(input);
  let downloading: Progress | undefined;
  let shot: ScreenshotFile;
  try {
    shot = await asCli(device.screenshotToFile(file, { ...call, onDownload: async () => new TransferMeter(`downloading ${file}`, downloading = await startProgress(input.ctx, `downloading ${file}`)) }));
  } finally {
    downloading?.stop();
  }
  input.ctx.printer.result({ file, width: shot.width, height: shot.height, bytes: shot.size, sha256: shot.sha256 }, () => `${file}: ${shot.width}x${shot.height}, ${shot.size} bytes`);
  return 0;
};

export const install: Action<typeof installOptions> = async (input) => {
  const [apk] = input.args as [string];
  const { device, call } = libraryDevice(input);
  // Two progress lines, as before: the upload's bytes, then a spinner while the phone installs.
  let uploading: Progress | undefined;
  let installing: Progress | undefined;
  let res: InstallResult;
  try {
    res = await asCli(device.install(apk, {
      ...call,
      progress: {
        onUpload: async () => new TransferMeter(`uploading ${apk}`, uploading = await startProgress(input.ctx, `uploading ${apk}`)),
        onInstalling: async () => {
          uploading?.stop();
          installing = await startProgress(input.ctx, `installing ${apk} on ${device.serial}`);
        },
      },
    }));
  } finally {
    uploading?.stop();
    installing?.stop();
  }
  input.ctx.printer.result({ actionId: res.actionId, output: res.output, dispatched: res.dispatched, ambiguous: res.ambiguous }, () => res.output);
  return 0;
};
