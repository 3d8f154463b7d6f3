import type { ConnectRouter } from "@connectrpc/connect";
import { withReportedSerial } from "../routing/resolve-target.js";
import { create } from "@bufbuild/protobuf";
import { Errors, farmError, invalidArgument, NOT_DISPATCHED } from "@farm/shared/errors";
import { TIMEOUT_DEFAULT_MS, validateAppPackage, validateContext, validateLabel, validateTimeout } from "@farm/shared/evidence-options";
import type { Logger } from "@farm/shared/log";
import { EvidenceService, CaptureEvidenceResponseSchema, ListEvidenceResponseSchema, PullEvidenceResponseSchema } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { EvidenceFileHeaderSchema } from "@farm/shared/gen/farm/v1/evidence_pb";
import { evidenceMessage } from "../watch/messages.js";
import { requirePrincipal } from "../auth/auth.js";
import type { AgentCaller } from "../routing/agent-session.js";
import type { Registry } from "../registry/registry.js";
import type { EvidenceStore } from "./evidence-store.js";
import type { ActivityLog } from "../activity/activity-log.js";
import type { EvidenceGrants } from "./evidence-grants.js";
import type { EvidenceQuota } from "./evidence-quota.js";
import { bundleMaxBytes } from "../http/message-limits.js";
import { routeFor, SESSION_HEADER } from "../routing/device-service.js";
import type { LeaseManager } from "../leases/lease-manager.js";
import type { OpenStep, StepRecorder } from "../sessions/step-recorder.js";

/** Time for upload and bookkeeping on top of the device-work budget. */
const TRANSFER_ALLOWANCE_MS = 60_000;

export function registerEvidenceService(
  router: ConnectRouter,
  deps: { registry: Registry; leases: LeaseManager; store: EvidenceStore; grants: EvidenceGrants; quota: EvidenceQuota; activity: ActivityLog; log: Logger; recorder?: StepRecorder | undefined },
): void {
  router.service(EvidenceService, {
    async captureEvidence(req, ctx) {
      const principal = requirePrincipal(ctx);
      // Bad input fails here, before any agent or device is involved.
      validateLabel(req.label);
      validateContext(req.contextJson);
      const timeoutMs = req.timeoutMs === 0 ? TIMEOUT_DEFAULT_MS : validateTimeout(req.timeoutMs);
      validateAppPackage(req.appPackage);
      req = withReportedSerial(deps.registry, req);
      const serial = req.target?.serial ?? "";
      if (serial === "") throw invalidArgument("target.serial", "a device serial is required");
      const entry = { caller: principal.tokenName, leaseId: "", serial, physicalId: "", agentId: "", command: "captureEvidence", requestId: "", detail: req.label ? `label ${req.label.slice(0, 80)}` : "" };
      return deps.activity.track(entry, async (e) => {
        // A leased phone's evidence is its holder's to capture (lease_holder_only): refused before an id is issued.
        const route = await routeFor(deps, serial, req.target?.agent ?? "", false, ctx.requestHeader.get("x-farm-lease"), { method: EvidenceService.method.captureEvidence, caller: principal });
        // A phone adb does not show as `device` would only yield a failed bundle: refused before an id is issued or a file written.
        const shown = deps.registry.listDevices({ agent: route.agentId }).find((d) => d.serial === route.serial);
        if (shown && shown.state !== "device") {
          throw farmError(Errors.DEVICE_OFFLINE, `device ${serial} is ${shown.state} on agent ${route.agentName}: nothing was captured`, "target.serial", NOT_DISPATCHED);
        }
        // The bundle's largest size is held against the quota before any device is touched, until the capture settles.
        const reservation = await deps.quota.reserveCapture(principal.tokenName, "still", bundleMaxBytes("still"), (ctx.timeoutMs() ?? timeoutMs + TRANSFER_ALLOWANCE_MS) + TRANSFER_ALLOWANCE_MS);
        e.physicalId = route.physicalId;
        e.agentId = route.agentId;
        const deadline = Date.now() + (ctx.timeoutMs() ?? timeoutMs + TRANSFER_ALLOWANCE_MS);
        const session = route.session as AgentCaller;
        // In a session, the still is a step of its timeline (a version 1 record: its screenshot only).
        const sessionId = ctx.requestHeader.get(SESSION_HEADER);
        let step: OpenStep | undefined;
        if (sessionId && deps.recorder) step = await deps.recorder.open(await deps.recorder.session(sessionId, principal, route.physicalId));
        try {
          // The id is ours to give: only this agent, for this device, may upload under it.
          const grant = await deps.grants.issue({ kind: "still", agentId: route.agentId, agentToken: session.tokenName, serial, physicalId: route.physicalId, requestedBy: principal.tokenName }, reservation.id);
          const r = await session.call(EvidenceService.method.captureEvidence, { ...req, evidenceId: grant.evidenceId }, principal, deadline);
          if (r.evidenceId !== grant.evidenceId) {
            deps.log.warn("agent answered a capture with another evidence id; refused", { agent: route.agentName, issued: grant.evidenceId, answered: r.evidenceId });
            throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, `agent ${route.agentName} answered with evidence ${r.evidenceId}, not the ${grant.evidenceId} it was issued`, "evidence_id");
          }
          // The agent answers after its upload was published; check anyway.
          await deps.store.require(grant.evidenceId);
          const { text, manifest } = await deps.store.manifest(grant.evidenceId);
          const shot = manifest.artifacts.find((a) => a.kind === "screenshot" && a.path !== null && a.status === "complete");
          if (step && deps.recorder) {
            if (shot?.path) await deps.recorder.recordStill(step, grant.evidenceId, shot.path, r.status, principal.tokenName);
            else {
              await deps.recorder.record(
                step,
                EvidenceService.method.captureEvidence,
                req,
                { error: farmError(Errors.EVIDENCE_CAPTURE_FAILED, `evidence ${grant.evidenceId} (${r.status}) has no complete screenshot`) },
                "",
                principal.tokenName,
              );
            }
          }
          return create(CaptureEvidenceResponseSchema, { evidenceId: grant.evidenceId, status: r.status, manifestJson: text });
        } catch (error) {
          if (step && deps.recorder) await deps.recorder.record(step, EvidenceService.method.captureEvidence, req, { error }, "", principal.tokenName);
          throw error;
        } finally {
          await reservation.release();
        }
      });
    },

    async listEvidence(req) {
      const page = await deps.store.listPage({ serial: req.serial, status: req.status, label: req.label }, req);
      return create(ListEvidenceResponseSchema, {
        bundles: page.items.map((row) => evidenceMessage(row, deps.registry.agentName(row.agentId) ?? "")),
        nextPageToken: page.nextPageToken,
      });
    },

    async *pullEvidence(req) {
      const row = await deps.store.require(req.evidenceId);
      const { text, manifest } = await deps.store.manifest(row.evidenceId);
      for (const a of manifest.artifacts) {
        if (a.path === null) continue;
        yield create(PullEvidenceResponseSchema, {
          kind: { case: "file", value: create(EvidenceFileHeaderSchema, { path: a.path, size: BigInt(a.bytes ?? 0), sha256: a.sha256 ?? "" }) },
        });
        for await (const chunk of deps.store.read(row.evidenceId, a.path)) {
          yield create(PullEvidenceResponseSchema, { kind: { case: "chunk", value: chunk } });
        }
      }
      yield create(PullEvidenceResponseSchema, { kind: { case: "manifestJson", value: text } });
    },
  });
}
