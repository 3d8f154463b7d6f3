import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Errors } from "@farm/shared/errors";
import { CliError, cliErrorReport } from "../cli-error.js";
import { validateAppPackage, validateContext, validateLabel, validateOutputDir, validateTimeout } from "@farm/shared/evidence-options";
import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { FARM_VERSION } from "@farm/shared/version";
import { DeviceTargetSchema } from "@farm/shared/gen/farm/v1/device_service_pb";
import { EvidenceService } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { allPages } from "../all-pages.js";
import { parseFlags, requiredString, stringFlag } from "../args.js";
import { serviceClient } from "../client.js";
import { clientOptions, type Command, type CommandContext, type CommandGroup } from "../command.js";
import { table } from "../output.js";
import { clientSession } from "../session.js";
import { writePulledBundle } from "../bundle-writer.js";
import { videoGroup } from "./evidence-video.js";

/** Time for upload and transfer on top of the device-work budget. */
const TRANSFER_ALLOWANCE_MS = 60_000;

// --timeout here is the device-work budget, not the RPC deadline.
const connection = Object.fromEntries(Object.entries(clientOptions).filter(([k]) => k !== "timeout"));

/**
 * A failure after the coordinator has the bundle (the output dir was taken
 * meanwhile, the disk filled, the transfer broke): printed with the evidence
 * id, because the stored bundle can still be pulled.
 */
function failedAfterStore(ctx: CommandContext, err: unknown, evidenceId: string): number {
  const report = cliErrorReport(err);
  const data = { ...report, evidenceId };
  ctx.printer.emit(data, () => `error: ${report.message} [${report.code}${report.field ? `, field ${report.field}` : ""}]\nevidence ${evidenceId} is in the coordinator's store`);
  return 1;
}

const capture: Command = {
  name: "capture",
  summary: "Capture a still evidence bundle (screenshot, hierarchy, metadata)",
  usage:
    "farm evidence capture --device SERIAL [--agent NAME] [--output-dir /absolute/new/dir] [--label TEXT] [--context-json OBJECT] [--timeout MS] [--app-package PKG]",
  options: {
    ...connection,
    device: { type: "string" },
    agent: { type: "string" },
    "output-dir": { type: "string" },
    label: { type: "string" },
    "context-json": { type: "string" },
    timeout: { type: "string" },
    "app-package": { type: "string" },
  },
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    // Every rule is checked before any device, coordinator or file is touched.
    const serial = requiredString(parsed, "device");
    const label = validateLabel(stringFlag(parsed, "label"));
    const context = validateContext(stringFlag(parsed, "context-json"));
    const timeoutMs = validateTimeout(stringFlag(parsed, "timeout"));
    const appPackage = validateAppPackage(stringFlag(parsed, "app-package"));
    const outputFlag = stringFlag(parsed, "output-dir");
    const outputDir = outputFlag === undefined ? undefined : validateOutputDir(outputFlag);
    const session = clientSession(ctx, { ...parsed, values: { ...parsed.values, timeout: undefined } });
    const client = serviceClient(EvidenceService, session.config);

    // The output dir is claimed only once the coordinator has taken the device
    // and stored a bundle: a wrong device or a refusal leaves no directory behind.
    const res = await client.captureEvidence(
      {
        target: create(DeviceTargetSchema, { serial, agent: stringFlag(parsed, "agent") ?? "" }),
        ...(label === null ? {} : { label }),
        contextJson: JSON.stringify(context),
        timeoutMs,
        appPackage,
        cliVersion: FARM_VERSION,
      },
      { timeoutMs: timeoutMs + TRANSFER_ALLOWANCE_MS },
    );
    let manifestPath: string | null = null;
    let manifest = JSON.parse(res.manifestJson) as EvidenceManifest;
    if (outputDir) {
      try {
        manifest = await writePulledBundle({ dir: outputDir, evidenceId: res.evidenceId, claim: true }, client.pullEvidence({ evidenceId: res.evidenceId }, { timeoutMs: TRANSFER_ALLOWANCE_MS }));
      } catch (err) {
        return failedAfterStore(ctx, err, res.evidenceId);
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
        manifestPath ? `manifest: ${manifestPath}` : `stored on the coordinator; \`farm evidence pull ${res.evidenceId} --output-dir DIR\` fetches it`,
        ...manifest.errors.map((e) => `  ${e.stage}: ${e.code}: ${e.message}`),
      ].join("\n"),
    );
    return complete ? 0 : 1;
  },
};

const list: Command = {
  name: "list",
  summary: "List bundles in the coordinator's evidence store",
  usage: "farm evidence list [--device SERIAL] [--status complete|partial|failed] [--label TEXT]",
  options: { ...clientOptions, device: { type: "string" }, status: { type: "string" }, label: { type: "string" } },
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const session = clientSession(ctx, parsed);
    const client = serviceClient(EvidenceService, session.config);
    const filter = { serial: stringFlag(parsed, "device") ?? "", status: stringFlag(parsed, "status") ?? "", label: stringFlag(parsed, "label") ?? "" };
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
      ),
    );
    return 0;
  },
};

const pull: Command = {
  name: "pull",
  summary: "Copy a stored bundle into a new directory, verifying every file",
  usage: "farm evidence pull EVIDENCE_ID --output-dir /absolute/new/dir",
  options: { ...clientOptions, "output-dir": { type: "string" } },
  positionals: true,
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options, true);
    const [id, ...extra] = parsed.positionals;
    if (!id || extra.length > 0) throw new CliError(Errors.INVALID_ARGUMENT, "expected exactly one EVIDENCE_ID", "evidence_id");
    const outputDir = validateOutputDir(stringFlag(parsed, "output-dir"));
    const session = clientSession(ctx, parsed);
    const client = serviceClient(EvidenceService, session.config);
    // Claimed when the coordinator starts sending: an unknown id creates nothing.
    const manifest = await writePulledBundle({ dir: outputDir, evidenceId: id, claim: true }, client.pullEvidence({ evidenceId: id }, { timeoutMs: Math.max(session.timeoutMs, TRANSFER_ALLOWANCE_MS) }));
    const manifestPath = join(outputDir, "manifest.json");
    ctx.printer.result({ evidenceId: id, status: manifest.status, manifestPath }, () => `evidence ${id} (${manifest.status}) written to ${outputDir}`);
    return 0;
  },
};

const verify: Command = {
  name: "verify",
  summary: "Check a bundle offline: schema, every artifact's size and sha256, and that complete media decode as recorded",
  usage: "farm evidence verify BUNDLE_DIR",
  options: { help: { type: "boolean", short: "h" } },
  positionals: true,
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options, true);
    const [dir, ...extra] = parsed.positionals;
    if (!dir || extra.length > 0) throw new CliError(Errors.INVALID_ARGUMENT, "expected exactly one BUNDLE_DIR", "bundle_dir");
    // Loaded here: the schema validator is only needed by this command.
    const { verifyBundle } = await import("../bundle-verify.js");
    const report = await verifyBundle(dir);
    const data = report.ok
      ? { ok: true, evidenceId: report.evidenceId, status: report.status, checked: report.checked }
      : { ok: false, code: Errors.EVIDENCE_VERIFY_FAILED.code, message: `${report.problems.length} problem(s) in ${dir}`, evidenceId: report.evidenceId, problems: report.problems };
    ctx.printer.emit(data, () => (report.ok ? `ok: ${report.checked} artifact(s) match the manifest` : ["FAILED:", ...report.problems.map((p) => `  ${p}`)].join("\n")));
    return report.ok ? 0 : 1;
  },
};

export const evidenceGroup: CommandGroup = {
  name: "evidence",
  summary: "Evidence bundles: capture, video, list, pull, verify",
  commands: [capture, videoGroup, list, pull, verify],
};
