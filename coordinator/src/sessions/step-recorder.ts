import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { DescMethodUnary, Message } from "@bufbuild/protobuf";
import { Errors, farmError, toErrorReport } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import type { StepEvidence, StepShot } from "@farm/shared/gen/farm/v1/agent_service_pb";
import type { BlobStore } from "../evidence/blob-store.js";
import { ownerOf } from "../evidence/blob-service.js";
import type { SessionImageStore } from "./session-image-store.js";
import type { SessionSteps, StepOcrRecord } from "./session-steps.js";
import type { SessionRow } from "./session-store.js";
import type { Sessions } from "./sessions.js";
import { describeStep, failureOf, resultOf } from "./step-describe.js";
import { STEP_RECORD_VERSION, type StepImageRecord, type StepRecordV1, type StepRecordV2 } from "./step-record.js";

/** Queues the OCR of a stored step's before screenshot (step-ocr.ts). */
export interface StepOcrQueue {
  queue(sessionId: string, sequence: number, sha256: string): void;
}

export interface StepRecorderDeps {
  sessions: Sessions;
  steps: SessionSteps;
  images: SessionImageStore;
  blobs: BlobStore;
  /** Absent: sessions with OCR on record their steps with OCR skipped. */
  ocr?: StepOcrQueue | undefined;
  log: Logger;
  now?: () => number;
}

/** A step under way: its session and place in the timeline. */
export interface OpenStep {
  session: SessionRow;
  sequence: number;
  startedAt: number;
}

/** What came back for a step: the answer or the failure, and what the agent captured. */
export interface StepOutcome {
  response?: Message | undefined;
  error?: unknown;
  evidence?: StepEvidence | undefined;
}

/**
 * Turns routed calls made in a session (header x-farm-session) into
 * timeline steps: checks that the call may be a step of that session,
 * numbers it, and stores what came back with the screenshots the agent took
 * around it. Screenshots arrive as the agent's blobs and are checked (the
 * agent's own upload, the announced sha256, a PNG of the announced size)
 * before they are kept.
 */
export class StepRecorder {
  private readonly now: () => number;

  constructor(private readonly deps: StepRecorderDeps) {
    this.now = deps.now ?? Date.now;
  }

  /**
   * The session a call names, checked: it is running, it is the caller's,
   * and it is on the phone the call goes to. Nothing is numbered yet.
   */
  session(sessionId: string, caller: { tokenName: string }, physicalId: string): SessionRow {
    const s = this.deps.sessions.get(sessionId);
    if (s.status !== "running") throw farmError(Errors.SESSION_ENDED, `session ${sessionId} has ended (${s.status}); start another with \`farm session start\``, "session_id");
    if (s.owner !== caller.tokenName) throw farmError(Errors.SESSION_MISMATCH, `session ${sessionId} belongs to ${s.owner}; only its owner records steps in it`, "session_id");
    if (s.physicalId !== physicalId) {
      throw farmError(Errors.SESSION_MISMATCH, `session ${sessionId} is on phone ${s.serial} (${s.physicalId}); this call goes to ${physicalId}`, "target.serial");
    }
    return s;
  }

  /** Numbers a step of a checked session; `known` are screens the agent need not upload again. */
  open(session: SessionRow): OpenStep & { known: string[] } {
    return { session, sequence: this.deps.steps.reserve(session.sessionId), startedAt: this.now(), known: this.deps.steps.knownImages(session.sessionId) };
  }

  /**
   * Stores a step from its outcome. A storage failure is logged and does
   * not change what the caller is told about the action itself.
   */
  async record(step: OpenStep, method: DescMethodUnary, request: Message, outcome: StepOutcome, agentToken: string, requestedBy: string): Promise<void> {
    const { session, sequence } = step;
    try {
      const ev = outcome.evidence;
      const before = ev?.before ? await this.keep(session.sessionId, ev.before, agentToken) : null;
      const after = ev?.after ? await this.keep(session.sessionId, ev.after, agentToken) : null;
      const failed = outcome.error !== undefined || outcome.response === undefined;
      const d = describeStep(method, request, outcome.response);
      const record: StepRecordV2 = {
        version: STEP_RECORD_VERSION,
        method: `${method.parent.typeName}/${method.name}`,
        action: d.action,
        description: d.description,
        arguments: d.arguments,
        result: failed ? failureOf(toErrorReport(outcome.error ?? farmError(Errors.INTERNAL, "no answer and no error"))) : resultOf(method, outcome.response as Message),
        before,
        after,
        startedAt: ev?.startTime ? timestampMs(ev.startTime) : step.startedAt,
        durationMs: ev?.startTime ? ev.durationMs : this.now() - step.startedAt,
        attempts: (ev?.attempts ?? []).map((a) => ({
          startedAt: a.startTime ? timestampMs(a.startTime) : 0,
          durationMs: a.durationMs,
          errorCode: a.error?.detail?.code ?? "",
          errorMessage: a.error?.message ?? "",
        })),
        requestedBy,
      };
      let ocr: StepOcrRecord | null = null;
      if (session.ocr) ocr = before?.sha256 && this.deps.ocr ? { status: "pending", observations: [] } : { status: "skipped", observations: [], error: before?.sha256 ? "OCR is not available on this coordinator" : "no before screenshot" };
      const stored = this.deps.steps.append(session.sessionId, sequence, record, { failed, ocr });
      if (stored && ocr?.status === "pending" && before?.sha256) this.deps.ocr?.queue(session.sessionId, sequence, before.sha256);
    } catch (err) {
      this.deps.log.error("a session step could not be stored", { sessionId: session.sessionId, sequence, error: (err as Error).message });
    }
  }

  /**
   * A still bundle captured in a session, attached as a version 1 record:
   * its screenshot as the only (after) image.
   */
  recordStill(step: OpenStep, evidenceId: string, screenshotFile: string, status: string, requestedBy: string): void {
    const record: StepRecordV1 = {
      screenshotPath: `evidence/${evidenceId}/${screenshotFile}`,
      action: "evidence",
      description: `still evidence ${evidenceId} (${status})`,
      time: step.startedAt,
      requestedBy,
    };
    try {
      const ocr: StepOcrRecord | null = step.session.ocr ? { status: "skipped", observations: [], error: "a still bundle's screenshot is not OCR'd" } : null;
      this.deps.steps.append(step.session.sessionId, step.sequence, record, { failed: false, ocr });
    } catch (err) {
      this.deps.log.error("a session step could not be stored", { sessionId: step.session.sessionId, sequence: step.sequence, error: (err as Error).message });
    }
  }

  /** A screenshot the agent reported, kept in the store, or the reason it is not. */
  private async keep(sessionId: string, shot: StepShot, agentToken: string): Promise<StepImageRecord> {
    const capturedAt = shot.captureTime ? timestampMs(shot.captureTime) : undefined;
    const base = { ...(capturedAt !== undefined ? { capturedAt } : {}) };
    if (shot.error) return { ...base, error: { code: shot.error.detail?.code || "INTERNAL", message: shot.error.message } };
    try {
      if (!/^[0-9a-f]{64}$/.test(shot.sha256)) throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, "a step screenshot without a sha256");
      if (shot.blobId === "") {
        // Not uploaded again: only a screen this session already shows.
        const known = this.deps.steps.image(sessionId, shot.sha256);
        if (!known) throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, `the agent referred to screenshot ${shot.sha256}, which this session does not have`);
        return { ...base, sha256: known.sha256, width: known.width, height: known.height, size: known.size };
      }
      // Uploaded over the agent's own token (AgentBlobService), and only that upload counts.
      const blob = this.deps.blobs.take(shot.blobId, ownerOf({ kind: "agent", tokenName: agentToken }));
      if (blob.sha256 !== shot.sha256) {
        await this.deps.blobs.remove(shot.blobId);
        throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, `the screenshot's blob has sha256 ${blob.sha256}, the agent said ${shot.sha256}`);
      }
      await this.deps.images.adopt(blob.file, blob.sha256, { width: shot.width, height: shot.height });
      this.deps.steps.addImage({ sessionId, sha256: blob.sha256, size: blob.size, width: shot.width, height: shot.height });
      return { ...base, sha256: blob.sha256, width: shot.width, height: shot.height, size: blob.size };
    } catch (err) {
      const r = toErrorReport(err);
      this.deps.log.warn("a step screenshot was not kept", { sessionId, code: r.code, error: r.message });
      return { ...base, error: { code: r.code, message: r.message } };
    }
  }
}
