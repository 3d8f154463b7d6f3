import { rm } from "node:fs/promises";
import { ConnectError, type Transport } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { actionError, Errors, farmError, invalidArgument, toErrorReport } from "@farm/shared/errors";
import { validateAppPackage, validateContext, validateLabel, validateTimeout } from "@farm/shared/evidence-options";
import type { Logger } from "@farm/shared/log";
import { CaptureEvidenceResponseSchema, type CaptureEvidenceRequest, type CaptureEvidenceResponse } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import type { AdbServerAddress } from "../adb/adb-client.js";
import type { DeviceWatcher } from "../devices/device-watcher.js";
import { captureStill, type StagedBundle } from "./still-capture.js";
import { uploadBundle } from "./evidence-upload.js";
import { retryStagedUploads } from "./staged-retry.js";
import { stagedInFlight } from "./staged-uploads.js";

export interface EvidenceDeps {
  adb: AdbServerAddress;
  transport: Transport;
  stagingDir: string;
  agent: { id: string; host: string; version: string };
}

/**
 * A still capture routed to this agent: validate, capture into staging,
 * upload to the coordinator's store, then drop the staged copy. A bundle the
 * coordinator could not store stays staged and is retried; the caller gets
 * EVIDENCE_CAPTURE_FAILED naming it. One larger than the user's quota had
 * left (QUOTA_EXCEEDED) is dropped, and the caller gets that refusal. Capture is a read: it takes no device
 * lock and is not blocked by unresolved actions.
 */
export async function captureEvidence(
  req: CaptureEvidenceRequest,
  commandId: string,
  watcher: DeviceWatcher,
  deps: EvidenceDeps,
  log: Logger,
): Promise<CaptureEvidenceResponse> {
  const label = validateLabel(req.label);
  const context = validateContext(req.contextJson);
  const timeoutMs = validateTimeout(req.timeoutMs === 0 ? undefined : req.timeoutMs);
  const appPackage = validateAppPackage(req.appPackage) || null;
  // The coordinator issues the id: the only one it lets this agent upload this bundle under.
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(req.evidenceId)) {
    throw invalidArgument("evidence_id", "the coordinator issues evidence ids; this request carries none (an older coordinator?)");
  }
  const serial = req.target?.serial ?? "";
  const device = watcher.device(serial);
  if (!device || device.state !== "device") {
    throw actionError(Errors.DEVICE_OFFLINE, `device ${serial} is ${device?.state ?? "not connected to this agent's adb server"}`, { dispatched: false, ambiguous: false }, "target.serial");
  }
  const evidenceId = req.evidenceId;
  stagedInFlight.add(evidenceId);
  try {
    let staged: StagedBundle;
    try {
      staged = await captureStill(
        { evidenceId, commandId, serial, label, context, timeoutMs, cliVersion: req.cliVersion || null, appPackage },
        { adb: deps.adb, stagingDir: deps.stagingDir, device: { physicalId: device.identity.physicalId, bootId: device.facts.bootId || null }, agent: deps.agent },
      );
    } catch (err) {
      throw storageFailure(evidenceId, err);
    }
    log.info("evidence captured", { evidenceId, serial, status: staged.manifest.status });
    try {
      await uploadBundle(deps.transport, {
        evidenceId,
        agentId: deps.agent.id,
        serial,
        physicalId: device.identity.physicalId,
        kind: "still",
        dir: staged.dir,
        files: staged.files,
      });
    } catch (err) {
      if (toErrorReport(err).code === Errors.QUOTA_EXCEEDED.code) {
        // Larger than what was left of the user's quota when the capture started: it never
        // fits, and sent again once its reservation is gone it would be stored past the quota.
        await rm(staged.dir, { recursive: true, force: true });
        log.warn("evidence larger than its quota reservation; not kept", { evidenceId });
        throw err;
      }
      // The whole bundle stays staged and goes up once the coordinator can take it.
      retryStagedUploads({ stagingDir: deps.stagingDir, transport: deps.transport, agentId: deps.agent.id, log });
      const r = toErrorReport(err);
      log.warn("evidence upload refused; the bundle stays staged", { evidenceId, code: r.code });
      const why = r.message.replace(`evidence ${evidenceId}: `, "");
      throw farmError(
        Errors.EVIDENCE_CAPTURE_FAILED,
        `evidence ${evidenceId}: the coordinator did not store the ${staged.manifest.status} bundle (${r.code}: ${why}); it stays staged on agent ${deps.agent.id} and is uploaded again when the coordinator can take it`,
      );
    }
    // The coordinator holds the verified copy now.
    await rm(staged.dir, { recursive: true, force: true });
    return create(CaptureEvidenceResponseSchema, { evidenceId, status: staged.manifest.status, manifestJson: JSON.stringify(staged.manifest) });
  } finally {
    stagedInFlight.delete(evidenceId);
  }
}

/**
 * A file-system failure while staging (no space, quota, I/O error) is an
 * evidence failure naming the bundle, never INTERNAL. Errors that already
 * carry a farm code pass through.
 */
function storageFailure(evidenceId: string, err: unknown): unknown {
  if (err instanceof ConnectError) return err;
  const code = (err as NodeJS.ErrnoException | null)?.code;
  if (typeof code !== "string" || !code.startsWith("E")) return err;
  return farmError(Errors.EVIDENCE_CAPTURE_FAILED, `evidence ${evidenceId}: the agent could not stage the bundle: ${(err as Error).message}`, undefined, undefined, err);
}
