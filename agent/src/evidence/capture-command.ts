import { randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { Code, type Transport } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { actionError, ErrorCodes } from "@farm/shared/errors";
import { validateAppPackage, validateContext, validateLabel, validateTimeout } from "@farm/shared/evidence-options";
import type { Logger } from "@farm/shared/log";
import { CaptureEvidenceResponseSchema, type CaptureEvidenceRequest, type CaptureEvidenceResponse } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import type { AdbServerAddress } from "../adb-client.js";
import type { DeviceWatcher } from "../device-watcher.js";
import { captureStill } from "./still-capture.js";
import { uploadBundle } from "./evidence-upload.js";

export interface EvidenceDeps {
  adb: AdbServerAddress;
  transport: Transport;
  stagingDir: string;
  agent: { id: string; host: string; version: string };
}

/**
 * A still capture routed to this agent: validate, capture into staging,
 * upload to the coordinator's store, then drop the staged copy. Capture is a
 * read: it takes no device lock and is not blocked by unresolved actions.
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
  const serial = req.target?.serial ?? "";
  const device = watcher.device(serial);
  if (!device || device.state !== "device") {
    throw actionError(Code.FailedPrecondition, ErrorCodes.deviceOffline, `device ${serial} is ${device?.state ?? "not connected to this agent's adb server"}`, { dispatched: false, ambiguous: false }, "serial");
  }
  const evidenceId = randomUUID();
  const staged = await captureStill(
    { evidenceId, commandId, serial, label, context, timeoutMs, cliVersion: req.cliVersion || null, appPackage },
    { adb: deps.adb, stagingDir: deps.stagingDir, device: { physicalId: device.identity.physicalId, bootId: device.facts.bootId || null }, agent: deps.agent },
  );
  log.info("evidence captured", { evidenceId, serial, status: staged.manifest.status });
  await uploadBundle(deps.transport, {
    evidenceId,
    agentId: deps.agent.id,
    serial,
    physicalId: device.identity.physicalId,
    kind: "still",
    dir: staged.dir,
    files: staged.files,
  });
  // The coordinator holds the verified copy now.
  await rm(staged.dir, { recursive: true, force: true });
  return create(CaptureEvidenceResponseSchema, { evidenceId, status: staged.manifest.status, manifestJson: JSON.stringify(staged.manifest) });
}
