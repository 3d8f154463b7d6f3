import { join } from "node:path";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Exit, exitCodeFor } from "@farm/shared/error-codes";
import { Errors } from "@farm/shared/errors";
import { CliError } from "../cli-error.js";
import { cliErrorReport } from "../cli-error-report.js";
import { validateAppPackage, validateContext, validateLabel, validateOutputDir, validateTimeout } from "@farm/shared/evidence-options";
import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { EvidenceService } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { allPages } from "@farm/client/all-pages";
import { serviceClient } from "@farm/client/transport";
import { errorLine, table } from "../output.js";
import { clientSession } from "../session.js";
import { Device } from "@farm/client/device";
import { pullBundle } from "@farm/client/evidence-pull";
import { FarmClient } from "@farm/client/farm-client";
import { startProgress, TransferMeter, type Progress } from "../progress/progress.js";
import type { captureOptions, evidenceListOptions, pullOptions, verifyOptions } from "../tree/evidence-commands.js";
import type { Action, CommandContext } from "../tree/spec.js";
import { asCli, libraryWire } from "./device-target.js";

/** Time for upload and transfer on top of the device-work budget. */
const TRANSFER_ALLOWANCE_MS = 60_000;

/** DIR, or the old `--output-dir DIR`; at most one of them. */
export function outputDirOf(positional: string | undefined, flag: string | undefined): string | undefined {
  if (positional !== undefined && flag !== undefined) throw new CliError(Errors.INVALID_ARGUMENT, "give the directory once: DIR or --output-dir DIR", "output-dir");
  return positional ?? flag;
}

/**
 * A failure after the coordinator has the bundle (the output dir was taken
 * meanwhile, the disk filled, the transfer broke): printed with the evidence
 * id, because the stored bundle can still be pulled.
 */
function failedAfterStore(ctx: CommandContext, err: unknown, evidenceId: string): number {
  const report = cliErrorReport(err);
  const data = { ...report, evidenceId };
  ctx.printer.emit(data, () => `${errorLine(report)}\nevidence ${evidenceId} is in the coordinator's store`);
  return exitCodeFor(report.code);
}

/**
 * A partial or failed capture is farm's failure (69, EVIDENCE_CAPTURE_FAILED)
 * unless every error in it is the app under test's own doing (an app bridge
 * that is not ready, say): then it is the test's outcome, 1. Either way
 * the JSON's code stays EVIDENCE_CAPTURE_FAILED.
 */
export function captureExitCode(errors: readonly { code: string }[]): number {
  const appsOwn = errors.length > 0 && errors.every((e) => exitCodeFor(e.code) === Exit.TEST_FAILED);
  return appsOwn ? Exit.TEST_FAILED : exitCodeFor(Errors.EVIDENCE_CAPTURE_FAILED.code);
}

/** `farm evidence capture [DIR]`: a still bundle, kept on the coordinator and, with DIR, written there. */
export const capture: Action<typeof captureOptions> = async (input) => {
  const { opts, ctx } = input;
  // Every rule is checked before any device, coordinator or file is touched.
  const serial = opts.device;
  const label = validateLabel(opts.label);
  const context = validateContext(opts.contextJson);
  const timeoutMs = validateTimeout(opts.timeout);
  const appPackage = validateAppPackage(opts.appPackage);
  const outputFlag = outputDirOf(input.args[0], opts.outputDir);
  const outputDir = outputFlag === undefined ? undefined : validateOutputDir(outputFlag);
  // --timeout is the device-work budget here, not each call's deadline.
  const session = clientSession({ ...input, opts: { ...opts, timeout: undefined } });
  // In a session (FARM_SESSION), the still is attached to its timeline.
  const scope = { lease: opts.lease || undefined, session: input.ctx.env["FARM_SESSION"] || undefined };
  const wire = libraryWire(session);
  const device = new Device(wire, serial, opts.agent ?? "", scope);

  // The output dir is claimed only once the coordinator has taken the device
  // and stored a bundle: a wrong device or a refusal leaves no directory behind.
  const res = await asCli(device.captureEvidence({ label: label ?? undefined, context, timeoutMs, appPackage }));
  let manifestPath: string | null = null;
  let manifest = res.manifest;
  if (outputDir) {
    let pulling: Progress | undefined;
    try {
      // The directory was checked before the capture; taken meanwhile, the claim fails and says so.
      manifest = await pullBundle(wire, scope, res.evidenceId, outputDir, {
        timeoutMs: TRANSFER_ALLOWANCE_MS,
        onDownload: async () => new TransferMeter(`pulling ${res.evidenceId}`, pulling = await startProgress(ctx, `pulling ${res.evidenceId}`)),
      });
    } catch (err) {
      return failedAfterStore(ctx, err, res.evidenceId);
    } finally {
      pulling?.stop();
    }
    manifestPath = join(outputDir, "manifest.json");
  }
  const complete = manifest.status === "complete";
  const data = complete
    ? { ok: true, status: manifest.status, manifestPath, evidenceId: res.evidenceId }
    : {
      ok: false,
      code: Errors.EVIDENCE_CAPTURE_FAILED.code,
      message: `capture is ${manifest.status}: ${manifest.errors.map((e) => `${e.stage}: ${e.code}`).join(", ")}`,
      status: manifest.status,
      manifestPath,
      evidenceId: res.evidenceId,
      errors: manifest.errors,
    };
  ctx.printer.emit(data, () =>
    [
      `evidence ${res.evidenceId}: ${manifest.status}`,
      manifestPath ? `manifest: ${manifestPath}` : `stored on the coordinator; \`farm evidence pull ${res.evidenceId} DIR\` fetches it`,
      ...manifest.errors.map((e) => `  ${e.stage}: ${e.code}: ${e.message}`),
    ].join("\n"));
  return complete ? 0 : captureExitCode(manifest.errors);
};

export const listEvidence: Action<typeof evidenceListOptions> = async (input) => {
  const { opts, ctx } = input;
  const session = clientSession(input);
  const client = serviceClient(EvidenceService, session.config);
  const filter = { serial: opts.device ?? "", status: opts.status ?? "", label: opts.label ?? "" };
  const rows = await allPages(async (page) => {
    const res = await client.listEvidence({ ...filter, ...page }, { timeoutMs: session.timeoutMs });
    return { items: res.bundles, nextPageToken: res.nextPageToken };
  });
  const bundles = rows.map((b) => ({
    evidenceId: b.evidenceId,
    kind: b.kind,
    status: b.status,
    label: b.label ?? null,
    serial: b.serial,
    physicalId: b.physicalId,
    agentId: b.agentId,
    agentName: b.agentName,
    createdAt: b.createTime ? new Date(timestampMs(b.createTime)).toISOString() : null,
    totalBytes: Number(b.totalBytes),
  }));
  ctx.printer.result({ bundles }, () =>
    table(
      ["EVIDENCE", "KIND", "STATUS", "DEVICE", "CREATED", "BYTES", "LABEL"],
      bundles.map((b) => [b.evidenceId, b.kind, b.status, b.serial, b.createdAt ?? "", String(b.totalBytes), b.label ?? ""]),
    ));
  return 0;
};

/** `farm evidence pull ID DIR` (or the old `--output-dir DIR`). */
export const pull: Action<typeof pullOptions> = async (input) => {
  const { opts, ctx } = input;
  const [id] = input.args as [string];
  const outputDir = validateOutputDir(outputDirOf(input.args[1], opts.outputDir));
  const session = clientSession(input);
  const farm = new FarmClient(libraryWire(session));
  // Claimed when the coordinator starts sending: an unknown id creates nothing.
  let pulling: Progress | undefined;
  let manifest: EvidenceManifest;
  try {
    ({ manifest } = await asCli(farm.pullEvidence(id, outputDir, {
      timeoutMs: Math.max(session.timeoutMs, TRANSFER_ALLOWANCE_MS),
      onDownload: async () => new TransferMeter(`pulling ${id}`, pulling = await startProgress(ctx, `pulling ${id}`)),
    })));
  } finally {
    pulling?.stop();
  }
  const manifestPath = join(outputDir, "manifest.json");
  ctx.printer.result({ evidenceId: id, status: manifest.status, manifestPath }, () => `evidence ${id} (${manifest.status}) written to ${outputDir}`);
  return 0;
};

export const verify: Action<typeof verifyOptions> = async ({ args, ctx }) => {
  const [dir] = args as [string];
  // Loaded here: the schema validator is only needed by this command.
  const { verifyBundle } = await import("../bundle-verify.js");
  const report = await verifyBundle(dir, ctx.env);
  const data = report.ok
    ? { ok: true, evidenceId: report.evidenceId, status: report.status, checked: report.checked }
    : { ok: false, code: Errors.EVIDENCE_VERIFY_FAILED.code, message: `${report.problems.length} problem(s) in ${dir}`, evidenceId: report.evidenceId, problems: report.problems };
  // A session exported while it ran is sound but not final: the pretty line says so as the JSON's status does.
  const running = report.status === "running" ? `; session ${report.evidenceId} was still running when exported (status: running): steps after the export are not in it` : "";
  ctx.printer.emit(data, () => (report.ok ? `ok: ${report.checked} artifact(s) match the manifest${running}` : ["FAILED:", ...report.problems.map((p) => `  ${p}`)].join("\n")));
  // A bundle that does not match its manifest is bad data (65), not a failing test.
  return report.ok ? 0 : exitCodeFor(Errors.EVIDENCE_VERIFY_FAILED.code);
};
