import { create, type DescMessage, type DescMethodUnary, type MessageInitShape } from "@bufbuild/protobuf";
import { withReportedSerial } from "../routing/resolve-target.js";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import { validateContext, validateLabel } from "@farm/shared/evidence-options";
import type { Logger } from "@farm/shared/log";
import { parseVideoSize, validateDurationSeconds, validateSessionId } from "@farm/shared/video-options";
import { VideoService, VideoSessionSchema, ListVideoSessionsResponseSchema, type VideoSession } from "@farm/shared/gen/farm/v1/video_service_pb";
import { requirePrincipal } from "../auth/auth.js";
import type { AgentCaller } from "../routing/agent-session.js";
import type { EvidenceStore } from "../evidence/evidence-store.js";
import type { Registry } from "../registry/registry.js";
import type { VideoSessionIndex, VideoSessionRow } from "./video-session-index.js";
import { videoSessionMessage } from "../watch/messages.js";
import type { ActivityLog } from "../activity/activity-log.js";
import type { EvidenceGrants } from "../evidence/evidence-grants.js";
import type { EvidenceQuota } from "../evidence/evidence-quota.js";
import { bundleMaxBytes } from "../http/message-limits.js";
import type { LeaseManager } from "../leases/lease-manager.js";
import { routeFor } from "../routing/device-service.js";

/** The agent waits 5 s for the recorder; metadata reads come before that. */
const START_BUDGET_MS = 30_000;
/** Stop waits 15 s for the bundle, then the agent uploads it. */
const STOP_BUDGET_MS = 80_000;
/** A recording's quota reservation outlives its duration by this: start, stop and the upload. */
const RECORDING_HOLD_MS = START_BUDGET_MS + STOP_BUDGET_MS + 120_000;
const STATUS_BUDGET_MS = 15_000;
const TERMINAL = new Set(["complete", "partial", "failed"]);

/** What the coordinator asked an agent about: its answer must be about exactly that. */
type Asked = Pick<VideoSessionRow, "sessionId" | "agentId" | "serial" | "physicalId">;

export function registerVideoService(
  router: ConnectRouter,
  deps: { registry: Registry; store: EvidenceStore; index: VideoSessionIndex; activity: ActivityLog; log: Logger; leases: LeaseManager; grants: EvidenceGrants; quota: EvidenceQuota },
): void {
  function call<I extends DescMessage, O extends DescMessage>(session: AgentCaller, method: DescMethodUnary<I, O>, value: MessageInitShape<I>, ctx: HandlerContext, budgetMs: number) {
    const budget = ctx.timeoutMs() ?? budgetMs;
    // The agent answers early enough for its answer to arrive in time.
    return session.call(method, value, requirePrincipal(ctx), Date.now() + budget);
  }

  /** The session's row, or EVIDENCE_SESSION_NOT_FOUND. */
  async function row(sessionId: string): Promise<VideoSessionRow> {
    validateSessionId(sessionId);
    const r = await deps.index.get(sessionId);
    if (!r) throw farmError(Errors.EVIDENCE_SESSION_NOT_FOUND, `no video session ${sessionId}`, "session_id");
    return r;
  }

  /** The agent holding a session; a terminal, stored session is answered from the index when it is offline. */
  function agentFor(r: VideoSessionRow): AgentCaller {
    const a = deps.registry.agentSession(r.agentId);
    if (!a) {
      throw farmError(
        Errors.AGENT_OFFLINE,
        `agent ${deps.registry.agentName(r.agentId) ?? r.agentId}, which runs session ${r.sessionId}, is offline; its worker keeps recording and finishes on its own`,
        "session_id",
      );
    }
    return a.session as AgentCaller;
  }

  /**
   * Stores what an agent answered about the session it was asked about.
   * An answer naming another session, agent or device is refused: no agent
   * can re-point a session (its own or another's) by what it says.
   */
  async function record(s: VideoSession | undefined, requestedBy: string, asked: Asked): Promise<VideoSession> {
    if (!s) throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, "agent answered without a session");
    checkAnswer(s, asked);
    const now = Date.now();
    // For a new session; the index keeps a stored session's requester and creation time.
    await deps.index.upsert({
      sessionId: s.sessionId,
      agentId: s.agentId,
      serial: s.serial,
      physicalId: s.physicalId,
      requestedBy,
      createdAt: now,
      updatedAt: now,
      status: s.status,
      code: s.code,
      message: s.message,
      workerAvailable: s.workerAvailable,
      recoveryState: s.recoveryState,
      manifestJson: s.manifestJson,
    });
    return decorate(s);
  }

  function checkAnswer(s: VideoSession, asked: Asked): void {
    const wrong = [
      s.sessionId !== asked.sessionId && `session ${s.sessionId}`,
      s.agentId !== asked.agentId && `agent ${s.agentId}`,
      s.serial !== asked.serial && `device ${s.serial}`,
      asked.physicalId !== "" && s.physicalId !== asked.physicalId && `physical id ${s.physicalId}`,
    ].filter((w): w is string => typeof w === "string");
    if (wrong.length === 0) return;
    const agent = deps.registry.agentName(asked.agentId) ?? asked.agentId;
    deps.log.warn("agent answered about another video session; refused", { agent, sessionId: asked.sessionId, answered: wrong.join(", ") });
    throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, `agent ${agent}, asked about session ${asked.sessionId} on ${asked.serial}, answered about ${wrong.join(", ")}; the answer is refused`, "session_id");
  }

  async function decorate(s: VideoSession): Promise<VideoSession> {
    s.agentName = deps.registry.agentName(s.agentId) ?? "";
    // Stored means in this coordinator's store, whatever the agent believes.
    s.stored = await deps.store.has(s.sessionId);
    return s;
  }

  /**
   * A recording of a leased phone is the lease holder's to stop (or an
   * admin's); whoever started it may always stop it. Of an unleased phone,
   * only its starter or an admin.
   */
  async function requireMayStop(r: VideoSessionRow, caller: { tokenName: string; admin: boolean }, leaseToken: string | null): Promise<void> {
    if (caller.admin || caller.tokenName === r.requestedBy) return;
    // The database decides on replicas: a lease released or granted through another replica counts in the next call.
    await deps.leases.requireHolderToChange(r.physicalId, caller, leaseToken, "stop its recordings");
    if (await deps.leases.isHolderStored(r.physicalId, caller.tokenName, leaseToken)) return;
    throw farmError(Errors.PERMISSION_DENIED, `session ${r.sessionId} was started by ${r.requestedBy}; only they, the phone's lease holder or an admin may stop it`, "session_id");
  }

  function fromRow(r: VideoSessionRow, stored: boolean): VideoSession {
    return videoSessionMessage(r, deps.registry.agentName(r.agentId) ?? "", stored);
  }

  /** A terminal session whose bundle is stored and whose agent is offline is answered from the index. */
  async function answeredFromIndex(r: VideoSessionRow): Promise<boolean> {
    return TERMINAL.has(r.status) && !deps.registry.agentSession(r.agentId) && (await deps.store.has(r.sessionId));
  }

  router.service(VideoService, {
    async startVideo(req, ctx) {
      const principal = requirePrincipal(ctx);
      // Bad input fails here, before any agent or device is involved.
      validateLabel(req.label);
      validateContext(req.contextJson);
      const seconds = validateDurationSeconds(req.durationSeconds);
      parseVideoSize(req.size);
      req = withReportedSerial(deps.registry, req);
      const serial = req.target?.serial ?? "";
      if (serial === "") throw invalidArgument("target.serial", "a device serial is required");
      const entry = { caller: principal.tokenName, leaseId: "", serial, physicalId: "", agentId: "", command: "startVideo", requestId: "", detail: `${req.durationSeconds} s${req.size ? ` at ${req.size}` : ""}` };
      return deps.activity.track(entry, async (e) => {
        // A leased phone's recordings are its holder's to start (lease_holder_only): refused before a session id is issued.
        const route = await routeFor(deps, serial, req.target?.agent ?? "", false, ctx.requestHeader.get("x-farm-lease"), { method: VideoService.method.startVideo, caller: principal });
        // Held until the bundle is stored (AgentEvidenceService releases it), or the start fails, or it expires.
        const reservation = await deps.quota.reserveCapture(principal.tokenName, "video", bundleMaxBytes("video"), seconds * 1000 + RECORDING_HOLD_MS);
        try {
          e.physicalId = route.physicalId;
          e.agentId = route.agentId;
          const session = route.session as AgentCaller;
          // The session id is ours to give: only this agent, for this device, may upload its bundle.
          const grant = await deps.grants.issue({ kind: "video", agentId: route.agentId, agentToken: session.tokenName, serial, physicalId: route.physicalId, requestedBy: principal.tokenName }, reservation.id);
          const res = await call(session, VideoService.method.startVideo, { ...req, sessionId: grant.evidenceId }, ctx, START_BUDGET_MS);
          const s = await record(res.session, principal.tokenName, { sessionId: grant.evidenceId, agentId: route.agentId, serial, physicalId: route.physicalId });
          e.detail += `, session ${s.sessionId}: ${s.status}`;
          deps.log.info("video session started", { sessionId: s.sessionId, serial, status: s.status, by: principal.tokenName });
          return { session: s };
        } catch (error) {
          await reservation.release();
          throw error;
        }
      });
    },

    async getVideoStatus(req, ctx) {
      const r = await row(req.sessionId);
      if (await answeredFromIndex(r)) return { session: fromRow(r, true) };
      const res = await call(agentFor(r), VideoService.method.getVideoStatus, req, ctx, STATUS_BUDGET_MS);
      return { session: await record(res.session, r.requestedBy, r) };
    },

    async stopVideo(req, ctx) {
      const r = await row(req.sessionId);
      // A repeated stop of a finished, stored session returns the same outcome.
      if (await answeredFromIndex(r)) return { session: fromRow(r, true) };
      await requireMayStop(r, requirePrincipal(ctx), ctx.requestHeader.get("x-farm-lease"));
      const entry = { caller: requirePrincipal(ctx).tokenName, leaseId: "", serial: r.serial, physicalId: r.physicalId, agentId: r.agentId, command: "stopVideo", requestId: "", detail: `session ${r.sessionId}` };
      return deps.activity.track(entry, async (e) => {
        const res = await call(agentFor(r), VideoService.method.stopVideo, req, ctx, STOP_BUDGET_MS);
        const s = await record(res.session, r.requestedBy, r);
        e.detail += `: ${s.status}`;
        return { session: s };
      });
    },

    async inspectVideo(req, ctx) {
      const r = await row(req.sessionId);
      const res = await call(agentFor(r), VideoService.method.inspectVideo, req, ctx, STATUS_BUDGET_MS);
      if (res.session) {
        checkAnswer(res.session, r);
        res.session = await decorate(res.session);
      }
      return res;
    },

    async releaseVideo(req, ctx) {
      // Admin only, by the access table.
      const principal = requirePrincipal(ctx);
      const r = await row(req.sessionId);
      deps.log.warn("video release requested", { sessionId: r.sessionId, by: principal.tokenName, reason: req.reason });
      const res = await call(agentFor(r), VideoService.method.releaseVideo, req, ctx, STATUS_BUDGET_MS);
      return { session: await record(res.session, r.requestedBy, r), released: res.released, note: res.note };
    },

    async listVideoSessions(req) {
      const page = await deps.index.listPage({ serial: req.serial, status: req.status }, req);
      // One read for the page, not one per session.
      const stored = await deps.store.publishedAmong(page.items.map((r) => r.sessionId));
      return create(ListVideoSessionsResponseSchema, { sessions: page.items.map((r) => fromRow(r, stored.has(r.sessionId))), nextPageToken: page.nextPageToken });
    },
  });
}
