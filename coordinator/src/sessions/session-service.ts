import { create } from "@bufbuild/protobuf";
import { withReportedSerial } from "../routing/resolve-target.js";
import type { ConnectRouter } from "@connectrpc/connect";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import {
  SessionService,
  SessionStatus,
  EndSessionResponseSchema,
  GetSessionResponseSchema,
  ListSessionsResponseSchema,
  ListSessionStepsResponseSchema,
  ReadSessionImageResponseSchema,
  AppendSessionStepResponseSchema,
  StartSessionResponseSchema,
  type ClientShot,
} from "@farm/shared/gen/farm/v1/session_service_pb";
import { requirePrincipal } from "../auth/auth.js";
import type { ActivityLog } from "../activity/activity-log.js";
import type { LeaseManager } from "../leases/lease-manager.js";
import type { Registry } from "../registry/registry.js";
import { sessionMessage } from "../watch/messages.js";
import { sessionStateOf } from "./session-status.js";
import { parsePolicy } from "@farm/shared/capture-policy/policy";
import type { SessionRow } from "./session-store.js";
import { secretMask, type Sessions } from "./sessions.js";
import type { SessionSteps } from "./session-steps.js";
import type { SessionImageStore } from "./session-image-store.js";
import { stepFor, stepMessage } from "./step-message.js";
import type { Summarizer } from "../auth/summary-key.js";
import type { ClientShotRequest, StepRecorder } from "./step-recorder.js";
import { timestampMs } from "@bufbuild/protobuf/wkt";

export interface SessionServiceDeps {
  sessions: Sessions;
  steps: SessionSteps;
  images: SessionImageStore;
  recorder: StepRecorder;
  leases: LeaseManager;
  registry: Registry;
  activity: ActivityLog;
  log: Logger;
  /** Summarises what a viewer may not read in steps (command-privacy.ts). */
  summaries: Summarizer;
}

/**
 * SessionService: starting needs the caller's lease on the phone (the
 * x-farm-lease header, checked as for a device change); ending is the
 * owner's or an admin's. Start and end go to the activity log.
 */
export function registerSessionService(router: ConnectRouter, deps: SessionServiceDeps): void {
  const toSession = (row: SessionRow) => sessionMessage(row, deps.registry.agentName(row.agentId) ?? "");

  router.service(SessionService, {
    startSession(req, ctx) {
      const principal = requirePrincipal(ctx);
      req = withReportedSerial(deps.registry, req);
      const serial = req.target?.serial ?? "";
      // Masked before it is cut: a cut would leave a secret's prefix no mask matches.
      const mask = secretMask(req.secrets.map((x) => x.value));
      const entry = { caller: principal.tokenName, leaseId: "", serial, physicalId: "", agentId: "", command: "startSession", requestId: "", detail: (mask ? mask.text(req.name) : req.name).slice(0, 200) };
      return deps.activity.track(entry, async (e) => {
        if (serial === "") throw invalidArgument("target.serial", "a device serial is required");
        const route = deps.registry.route(serial, req.target?.agent ?? "");
        e.physicalId = route.physicalId;
        e.agentId = route.agentId;
        // LEASE_REQUIRED / LEASE_HELD_BY_OTHER: a session hangs off the caller's own lease (on replicas, as stored).
        const lease = await deps.leases.authorizeStored(route.physicalId, ctx.requestHeader.get("x-farm-lease"));
        e.leaseId = lease.leaseId;
        const row = await deps.sessions.start(
          principal.tokenName,
          { leaseId: lease.leaseId, physicalId: route.physicalId, agentId: route.agentId, serial: route.serial },
          { name: req.name, context: req.context ?? {}, ocr: req.ocr, policyJson: req.policyJson === "" ? "" : checkedPolicyJson(req.policyJson), secrets: req.secrets.map((x) => ({ name: x.name, value: x.value })) },
        );
        e.detail = `session ${row.sessionId}${row.name ? ` (${row.name.slice(0, 100)})` : ""}`;
        deps.log.info("session started", { sessionId: row.sessionId, serial, leaseId: lease.leaseId, by: principal.tokenName });
        return create(StartSessionResponseSchema, { session: toSession(row) });
      });
    },
    endSession(req, ctx) {
      const principal = requirePrincipal(ctx);
      const entry = { caller: principal.tokenName, leaseId: "", serial: "", physicalId: "", agentId: "", command: "endSession", requestId: "", detail: req.sessionId.slice(0, 128) };
      return deps.activity.track(entry, async (e) => {
        const status = req.status === SessionStatus.UNSPECIFIED ? "passed" : sessionStateOf(req.status);
        if (status !== "passed" && status !== "failed") throw invalidArgument("status", "status must be PASSED or FAILED (unset means PASSED)");
        const known = await deps.sessions.get(req.sessionId);
        Object.assign(e, { leaseId: known.leaseId, serial: known.serial, physicalId: known.physicalId, agentId: known.agentId });
        const row = await deps.sessions.end(req.sessionId, status, principal);
        e.detail = `session ${row.sessionId}: ${row.status}`;
        deps.log.info("session ended", { sessionId: row.sessionId, status: row.status, by: principal.tokenName });
        return create(EndSessionResponseSchema, { session: toSession(row) });
      });
    },
    async getSession(req) {
      return create(GetSessionResponseSchema, { session: toSession(await deps.sessions.get(req.sessionId)) });
    },
    async listSessions(req) {
      let physicalId = req.physicalId;
      if (req.serial !== "") {
        const id = deps.registry.physicalIdOf(req.serial);
        if (!id) throw deps.registry.unresolvedSerial(req.serial, "serial");
        if (physicalId !== "" && physicalId !== id) throw invalidArgument("physical_id", `serial ${req.serial} is physical device ${id}, not ${physicalId}`);
        physicalId = id;
      }
      const status = req.status === SessionStatus.UNSPECIFIED ? undefined : sessionStateOf(req.status);
      if (req.status !== SessionStatus.UNSPECIFIED && status === undefined) throw invalidArgument("status", `unknown session status ${req.status}`);
      const page = await deps.sessions.listPage({ physicalId, status, owner: req.owner }, req);
      return create(ListSessionsResponseSchema, { sessions: page.items.map(toSession), nextPageToken: page.nextPageToken });
    },
    async listSessionSteps(req, ctx) {
      const viewer = requirePrincipal(ctx);
      const session = await deps.sessions.get(req.sessionId);
      const page = await deps.steps.listPage(session.sessionId, req);
      return create(ListSessionStepsResponseSchema, { steps: page.items.map((s) => stepFor(viewer, stepMessage(s), deps.summaries)), nextPageToken: page.nextPageToken });
    },
    async appendSessionStep(req, ctx) {
      const principal = requirePrincipal(ctx);
      const step = await deps.recorder.appendClientStep(req.sessionId, principal, {
        action: req.action,
        description: req.description,
        arguments: req.arguments,
        ok: req.ok,
        errorCode: req.errorCode,
        errorMessage: req.errorMessage,
        response: req.response,
        artifacts: req.artifacts,
        startTime: req.startTime ? timestampMs(req.startTime) : undefined,
        durationMs: req.durationMs,
        before: clientShot(req.before),
        after: clientShot(req.after),
      });
      return create(AppendSessionStepResponseSchema, { step: stepFor(principal, stepMessage(step), deps.summaries) });
    },
    async *readSessionImage(req) {
      const session = await deps.sessions.get(req.sessionId);
      const row = /^[0-9a-f]{64}$/.test(req.sha256) ? await deps.steps.image(session.sessionId, req.sha256) : undefined;
      if (!row) throw farmError(Errors.NOT_FOUND, `session ${session.sessionId} shows no screenshot ${req.sha256}`, "sha256");
      let first = true;
      for await (const chunk of deps.images.read(row.sha256, row.mimeType)) {
        yield create(ReadSessionImageResponseSchema, { size: first ? BigInt(row.size) : 0n, chunk });
        first = false;
      }
      if (first) yield create(ReadSessionImageResponseSchema, { size: BigInt(row.size) });
    },
  });
}

/** The policy as the coordinator keeps it: validated again here (a client is not trusted), in its canonical JSON. */
function checkedPolicyJson(text: string): string {
  return JSON.stringify(parsePolicy(text, "json"));
}

/** A client step's screenshot as the recorder takes it; unset: none sent. */
function clientShot(shot: ClientShot | undefined): ClientShotRequest | undefined {
  if (!shot) return undefined;
  return { blobId: shot.blobId, sha256: shot.sha256, errorCode: shot.errorCode, errorMessage: shot.errorMessage, ...(shot.captureTime ? { capturedAt: timestampMs(shot.captureTime) } : {}) };
}
