import { createHash } from "node:crypto";
import { readFile, rm, writeFile } from "node:fs/promises";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { DescMethodUnary, JsonObject, Message, MessageInitShape } from "@bufbuild/protobuf";
import { createRedactor, mergeRedactionRules, type RedactionRules, type Redactor } from "@farm/shared/redaction/redactor";
import { Errors, farmError, invalidArgument, toErrorReport } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import type { RedactionSchema, StepArtifactReport, StepEvidence, StepShot } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { capturesFor } from "@farm/shared/capture-policy/rules";
import { targetIdOf, type CapturePlan, type CapturePlans, type KeptCapture } from "./capture-plans.js";
import type { BlobStore } from "../evidence/blob-store.js";
import type { EvidenceQuota, FileReservation } from "../evidence/evidence-quota.js";
import { ownerOf } from "../evidence/blob-service.js";
import { pngSize, type SessionImageStore } from "./session-image-store.js";
import type { SessionSteps, StepOcrRecord, StoredStep } from "./session-steps.js";
import type { SessionRow } from "./session-store.js";
import type { Sessions } from "./sessions.js";
import type { Principal } from "../auth/token-store.js";
import { describeStep, failureOf, resultOf } from "./step-describe.js";
import { STEP_RECORD_VERSION, type StepArtifactRecord, type StepImageRecord, type StepRecordV1, type StepRecordV2, type StepResultRecord } from "./step-record.js";

/** Files kept with a step: what the dashboard and an export can show. */
const ARTIFACT_TYPES = new Set(["image/png", "application/json", "text/plain", "video/mp4"]);
const PROVIDERS = new Set(["agent", "adb", "app-sdk", "runner", "coordinator"]);
const CLIENT_ACTIONS = new Set(["assert-visual", "wait"]);
const MAX_ARTIFACTS = 16;
const MAX_CLIENT_JSON = 64 * 1024;
/** A client's text file (a wait's diagnosis) is masked in memory: this is as large as it may be. */
const MAX_CLIENT_TEXT = 16 * 1024 * 1024;

/** A client step as AppendSessionStep carries it. */
export interface ClientStepRequest {
  action: string;
  description: string;
  arguments: JsonObject | undefined;
  ok: boolean;
  errorCode: string;
  errorMessage: string;
  response: JsonObject | undefined;
  artifacts: { name: string; kind: string; provider: string; blobId: string; mimeType: string; when: string }[];
  startTime?: number | undefined;
  durationMs: number;
  /** The screen when the step started and when it ended; absent: the client sent none. */
  before?: ClientShotRequest | undefined;
  after?: ClientShotRequest | undefined;
}

/** A client step's screenshot: uploaded (blobId), one the session keeps already (sha256), or why there is none (errorCode). */
export interface ClientShotRequest {
  blobId: string;
  sha256: string;
  errorCode: string;
  errorMessage: string;
  capturedAt?: number | undefined;
}

/** What a client step cannot have, by capture kind: it runs in the CLI, not around an action on the agent. */
const CLIENT_STEP_LACKS: Readonly<Record<string, { name: (when: string) => string; what: string }>> = {
  elements: { name: (when) => `elements.${when}.json`, what: "UI element tree" },
  deviceLog: { name: () => "device.log", what: "device log" },
  video: { name: () => "video.mp4", what: "video" },
};
const MAX_SHOT_ERROR = 1000;

/** Masks a record's text in place: the description, arguments and result. Images are not masked. */
function maskRecord(record: StepRecordV2, mask: Redactor): void {
  record.description = mask.text(record.description);
  record.arguments = mask.json(record.arguments) as JsonObject;
  record.result = mask.json(record.result) as StepResultRecord;
  record.attempts = record.attempts.map((a) => ({ ...a, errorMessage: mask.text(a.errorMessage) }));
}

/** Queues the OCR of a stored step's before screenshot (step-ocr.ts). */
export interface StepOcrQueue {
  /** `mask`: the session's secrets, masked in what OCR reads. */
  queue(sessionId: string, sequence: number, sha256: string, mask?: Redactor): void;
}

export interface StepRecorderDeps {
  sessions: Sessions;
  steps: SessionSteps;
  images: SessionImageStore;
  blobs: BlobStore;
  /** Absent: sessions with OCR on record their steps with OCR skipped. */
  ocr?: StepOcrQueue | undefined;
  /** The sessions' capture policies (and the site default). */
  plans?: CapturePlans | undefined;
  /** The owners' evidence quotas, which session files count against; absent: not counted. */
  quota?: EvidenceQuota | undefined;
  log: Logger;
  now?: () => number;
}

/** A step under way: its session and place in the timeline. */
export interface OpenStep {
  session: SessionRow;
  sequence: number;
  startedAt: number;
  /** What the step asks of the agent beyond its screenshots (from the session's policy and --capture). */
  plan?: CapturePlan | undefined;
  /** Masks the session's secrets in what the coordinator keeps of the step. */
  mask?: Redactor | undefined;
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
  /**
   * Screens of a session not kept for its owner's quota, by session and
   * sha256 (the last few): the agent does not upload a screen again within
   * a step, and its second mention is the same skip, not a lie.
   */
  private readonly overQuota = new Map<string, string>();

  constructor(private readonly deps: StepRecorderDeps) {
    this.now = deps.now ?? Date.now;
  }

  /**
   * The session a call names, checked: it is running, it is the caller's,
   * and it is on the phone the call goes to. Nothing is numbered yet.
   */
  async session(sessionId: string, caller: { tokenName: string }, physicalId: string): Promise<SessionRow> {
    const s = await this.deps.sessions.get(sessionId);
    if (s.status !== "running") throw farmError(Errors.SESSION_ENDED, `session ${sessionId} has ended (${s.status}); start another with \`farm session start\``, "session_id");
    if (s.owner !== caller.tokenName) throw farmError(Errors.SESSION_MISMATCH, `session ${sessionId} belongs to ${s.owner}; only its owner records steps in it`, "session_id");
    if (s.physicalId !== physicalId) {
      throw farmError(Errors.SESSION_MISMATCH, `session ${sessionId} is on phone ${s.serial} (${s.physicalId}); this call goes to ${physicalId}`, "target.serial");
    }
    return s;
  }

  /** Numbers a step of a checked session; `known` are screens the agent need not upload again. */
  async open(session: SessionRow): Promise<OpenStep & { known: string[] }> {
    const secrets = this.deps.sessions.secretsOf(session);
    const known = await this.deps.steps.knownImages(session.sessionId);
    // Numbered last, once nothing before it can fail: a refused open leaves no gap.
    const sequence = await this.deps.steps.reserve(session.sessionId);
    return {
      session,
      sequence,
      startedAt: this.now(),
      known,
      ...(secrets.length > 0 ? { mask: createRedactor({ secrets }) } : {}),
    };
  }

  /**
   * What a routed step asks of the agent: the captures its session's policy
   * and `--capture` want, and the masking to apply before anything leaves
   * the agent's host.
   */
  planFor(
    step: OpenStep,
    method: DescMethodUnary,
    request: Message,
    perAction: readonly string[],
    log: { package?: string; filterspec?: string } = {},
  ): { captures: string[]; redaction: MessageInitShape<typeof RedactionSchema>; logFilterspec: string; logPackage: string } {
    const plans = this.deps.plans;
    const secrets = this.deps.sessions.secretsOf(step.session);
    if (!plans) return { captures: [], redaction: { secrets }, logFilterspec: log.filterspec ?? "", logPackage: log.package ?? "" };
    const d = describeStep(method, request, undefined, step.mask);
    const sel = ((d.arguments["tap"] as JsonObject | undefined)?.["element"] as JsonObject | undefined) ?? undefined;
    const targetKnown = !sel || typeof sel["resourceId"] === "string";
    step.plan = plans.plan(step.session, d.action, targetIdOf(d.arguments, undefined), perAction, targetKnown);
    const { raw } = plans.policyOf(step.session);
    const r = this.redactRules(step.session);
    return {
      captures: step.plan.tokens,
      redaction: { secrets, labels: [...r.labels], fields: [...r.fields], headers: [...r.headers], unmaskHeaders: [...r.unmaskHeaders] },
      // The action's own --log-filter / --log-package win over the policy's.
      logFilterspec: log.filterspec ?? raw.log?.filterspec ?? "",
      logPackage: log.package ?? raw.log?.package ?? "",
    };
  }

  /** The policy's redaction rules and the site's, as one union (none without capture plans). */
  private redactRules(session: SessionRow): Required<RedactionRules> {
    const plans = this.deps.plans;
    const policy = plans ? plans.policyOf(session).raw.redact : undefined;
    return mergeRedactionRules({ secrets: [], ...policy }, { secrets: [], ...plans?.siteRedact });
  }

  /**
   * Masks a client's file before it is kept: the session's secrets in its
   * text, and in JSON (a wait's diagnosis) the policy's fields and the
   * labels of every UI element in it, as the agent masks its trees.
   */
  private maskClientFile(session: SessionRow, mimeType: string, body: string): string | undefined {
    const rules = this.redactRules(session);
    const secrets = this.deps.sessions.secretsOf(session);
    if (secrets.length === 0 && rules.labels.length === 0 && rules.fields.length === 0) return undefined;
    const mask = createRedactor({ ...rules, secrets });
    if (mimeType !== "application/json") return mask.text(body);
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      return mask.text(body);
    }
    return `${JSON.stringify(mask.json(parsed), null, 2)}\n`;
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
      // Masked first: every string below is built from masked values.
      const d = describeStep(method, request, outcome.response, step.mask);
      const result = failed ? failureOf(toErrorReport(outcome.error ?? farmError(Errors.INTERNAL, "no answer and no error"))) : resultOf(method, outcome.response as Message, step.mask);
      // What the policy keeps, now that the step's outcome is known (screenChanged: its pixels changed).
      let kept: Map<string, KeptCapture> | undefined;
      if (step.plan && this.deps.plans) {
        const facts = step.plan.facts.targetId ? step.plan : { ...step.plan, facts: { ...step.plan.facts, targetId: targetIdOf(d.arguments, result.response) } };
        const screenChanged = Boolean(before?.sha256 && after?.sha256 && before.sha256 !== after.sha256);
        kept = this.deps.plans.keep(facts, { screenChanged, failed });
      }
      const record: StepRecordV2 = {
        version: STEP_RECORD_VERSION,
        method: `${method.parent.typeName}/${method.name}`,
        action: d.action,
        description: d.description,
        arguments: d.arguments,
        result,
        before,
        after,
        startedAt: ev?.startTime ? timestampMs(ev.startTime) : step.startedAt,
        durationMs: ev?.startTime ? ev.durationMs : this.now() - step.startedAt,
        artifacts: await this.keepArtifacts(session.sessionId, ev?.artifacts ?? [], agentToken, kept),
        attempts: (ev?.attempts ?? []).map((a) => ({
          startedAt: a.startTime ? timestampMs(a.startTime) : 0,
          durationMs: a.durationMs,
          errorCode: a.error?.detail?.code ?? "",
          errorMessage: a.error?.message ?? "",
        })),
        requestedBy,
      };
      if (step.mask) maskRecord(record, step.mask);
      let ocr: StepOcrRecord | null = null;
      if (session.ocr) ocr = before?.sha256 && this.deps.ocr ? { status: "pending", observations: [] } : { status: "skipped", observations: [], error: before?.sha256 ? "OCR is not available on this coordinator" : "no before screenshot" };
      const stored = await this.deps.steps.append(session.sessionId, sequence, record, { failed, ocr });
      if (stored && ocr?.status === "pending" && before?.sha256) this.deps.ocr?.queue(session.sessionId, sequence, before.sha256, step.mask);
    } catch (err) {
      this.deps.log.error("a session step could not be stored", { sessionId: session.sessionId, sequence, error: (err as Error).message });
    }
  }

  /**
   * A still bundle captured in a session, attached as a version 1 record:
   * its screenshot as the only (after) image.
   */
  async recordStill(step: OpenStep, evidenceId: string, screenshotFile: string, status: string, requestedBy: string): Promise<void> {
    const record: StepRecordV1 = {
      screenshotPath: `evidence/${evidenceId}/${screenshotFile}`,
      action: "evidence",
      description: `still evidence ${evidenceId} (${status})`,
      time: step.startedAt,
      requestedBy,
    };
    try {
      const ocr: StepOcrRecord | null = step.session.ocr ? { status: "skipped", observations: [], error: "a still bundle's screenshot is not OCR'd" } : null;
      await this.deps.steps.append(step.session.sessionId, step.sequence, record, { failed: false, ocr });
    } catch (err) {
      this.deps.log.error("a session step could not be stored", { sessionId: step.session.sessionId, sequence: step.sequence, error: (err as Error).message });
    }
  }

  /**
   * The agent's artifacts (a device log, a video, a UI tree), each kept
   * like a screenshot (its own blob, the announced sha256), or recorded as
   * skipped or dropped with the reason: a gap is never silent.
   */
  private async keepArtifacts(sessionId: string, reports: readonly StepArtifactReport[], agentToken: string, kept?: ReadonlyMap<string, KeptCapture>): Promise<StepArtifactRecord[]> {
    const out: StepArtifactRecord[] = [];
    for (const a of reports.slice(0, MAX_ARTIFACTS)) {
      // A speculative capture the step's outcome does not keep is thrown away, unseen.
      if (kept && !kept.has(a.token)) {
        if (a.blobId) await this.deps.blobs.remove(a.blobId);
        continue;
      }
      const why = kept?.get(a.token);
      const rec: StepArtifactRecord = {
        name: a.name,
        kind: a.kind,
        provider: a.provider,
        ...(a.when ? { when: a.when } : {}),
        ...(why?.reason ? { reason: why.reason } : {}),
        ...(why?.speculative ? { speculative: true } : {}),
      };
      if (a.skippedReason) rec.skippedReason = a.skippedReason;
      if (a.warning) rec.warning = a.warning;
      if (a.blobId) {
        let held: FileReservation | undefined;
        try {
          if (!ARTIFACT_TYPES.has(a.mimeType)) throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, `an artifact of type ${a.mimeType} is not kept`);
          held = await this.holdFile(sessionId, a.blobId, ownerOf({ kind: "agent", tokenName: agentToken }));
          const blob = await this.deps.blobs.take(a.blobId, ownerOf({ kind: "agent", tokenName: agentToken }));
          if (blob.sha256 !== a.sha256) {
            await this.deps.blobs.remove(a.blobId);
            throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, `the artifact's blob has sha256 ${blob.sha256}, the agent said ${a.sha256}`);
          }
          await this.deps.images.adoptFile(blob.file, blob.sha256, a.mimeType);
          await this.deps.steps.addImage({ sessionId, sha256: blob.sha256, size: blob.size, width: 0, height: 0, mimeType: a.mimeType });
          await held.keep(blob.size);
          Object.assign(rec, { sha256: blob.sha256, size: blob.size, mimeType: a.mimeType });
        } catch (err) {
          const r = toErrorReport(err);
          // Over quota the capture is skipped, said so with the code; the step is kept all the same.
          if (r.code === Errors.QUOTA_EXCEEDED.code) rec.skippedReason = `${r.code}: ${r.message}`;
          else rec.warning = `dropped: ${r.code}: ${r.message}`;
        } finally {
          // Kept: counted as stored already; dropped: nothing to hold.
          await held?.release();
        }
      }
      out.push(rec);
    }
    return out;
  }

  /**
   * A step the client made itself (a visual check, a wait) with the files
   * it uploaded: only the session's owner, while it runs. JSON and text
   * files are masked with the session's secrets before they are kept.
   */
  async appendClientStep(sessionId: string, caller: { tokenName: string; kind: Principal["kind"] }, req: ClientStepRequest): Promise<StoredStep> {
    const session = await this.deps.sessions.get(sessionId);
    if (session.status !== "running") throw farmError(Errors.SESSION_ENDED, `session ${sessionId} has ended (${session.status})`, "session_id");
    if (session.owner !== caller.tokenName) throw farmError(Errors.SESSION_MISMATCH, `session ${sessionId} belongs to ${session.owner}; only its owner records steps in it`, "session_id");
    if (!CLIENT_ACTIONS.has(req.action)) throw invalidArgument("action", `a client step is one of ${[...CLIENT_ACTIONS].join(", ")}`);
    if (req.description.length > 300) throw invalidArgument("description", "at most 300 characters");
    if (req.errorCode && !Object.hasOwn(Errors, req.errorCode)) throw invalidArgument("error_code", `${req.errorCode.slice(0, 64)} is not a code of the error table`);
    if (req.ok && req.errorCode) throw invalidArgument("error_code", "a step that passed has no error code");
    for (const [field, v] of [["arguments", req.arguments], ["response", req.response]] as const) {
      if (Buffer.byteLength(JSON.stringify(v ?? {})) > MAX_CLIENT_JSON) throw invalidArgument(field, `at most ${MAX_CLIENT_JSON} bytes as JSON`);
    }
    if (req.artifacts.length > MAX_ARTIFACTS) throw invalidArgument("artifacts", `at most ${MAX_ARTIFACTS} files`);
    req.artifacts.forEach((a, i) => {
      if (!/^[A-Za-z0-9._-]{1,100}$/.test(a.name)) throw invalidArgument(`artifacts[${i}].name`, "a plain file name");
      if (!ARTIFACT_TYPES.has(a.mimeType)) throw invalidArgument(`artifacts[${i}].mime_type`, `one of ${[...ARTIFACT_TYPES].join(", ")}`);
      if (!PROVIDERS.has(a.provider)) throw invalidArgument(`artifacts[${i}].provider`, `one of ${[...PROVIDERS].join(", ")}`);
    });
    // Every file is checked (the caller's own, not too large to mask) before any is taken or the step numbered.
    const owner = ownerOf(caller);
    for (const side of ["before", "after"] as const) {
      const shot = req[side];
      if (!shot) continue;
      const given = [shot.blobId, shot.sha256, shot.errorCode].filter((v) => v !== "").length;
      if (given !== 1) throw invalidArgument(side, "a screenshot is exactly one of blob_id, sha256 (a screen the session keeps) or error_code");
      if (shot.errorCode && !Object.hasOwn(Errors, shot.errorCode)) throw invalidArgument(`${side}.error_code`, `${shot.errorCode.slice(0, 64)} is not a code of the error table`);
      if (shot.errorMessage.length > MAX_SHOT_ERROR) throw invalidArgument(`${side}.error_message`, `at most ${MAX_SHOT_ERROR} characters`);
      if (shot.sha256) {
        if (!/^[0-9a-f]{64}$/.test(shot.sha256)) throw invalidArgument(`${side}.sha256`, "a sha256 in lowercase hex");
        // The screen is this session's already, or (after) the step's own before, uploaded with it.
        const ownBefore = side === "after" && Boolean(req.before?.blobId);
        if (!ownBefore && !(await this.deps.steps.image(sessionId, shot.sha256))) throw invalidArgument(`${side}.sha256`, `session ${sessionId} keeps no screenshot ${shot.sha256}`);
      }
      if (shot.blobId) await this.deps.blobs.peek(shot.blobId, owner);
    }
    for (const [i, a] of req.artifacts.entries()) {
      const { size } = await this.deps.blobs.peek(a.blobId, owner);
      if (a.mimeType !== "image/png" && size > MAX_CLIENT_TEXT) throw invalidArgument(`artifacts[${i}]`, `${a.name} is ${size} bytes; a text file is at most ${MAX_CLIENT_TEXT / (1024 * 1024)} MiB`);
    }
    const step = await this.open(session);
    const artifacts: StepArtifactRecord[] = [];
    for (const a of req.artifacts) {
      // Over the owner's quota the file is not kept, said so in the step; the step's result is.
      let held: FileReservation;
      try {
        held = await this.holdFile(sessionId, a.blobId, owner);
      } catch (err) {
        const r = toErrorReport(err);
        if (r.code !== Errors.QUOTA_EXCEEDED.code) throw err;
        artifacts.push({ name: a.name, kind: a.kind, provider: a.provider, ...(a.when ? { when: a.when } : {}), skippedReason: `${r.code}: ${r.message}` });
        continue;
      }
      const blob = await this.deps.blobs.take(a.blobId, owner);
      let sha256 = blob.sha256;
      let size = blob.size;
      let dims = { width: 0, height: 0 };
      if (a.mimeType === "image/png") {
        const png = await pngSize(blob.file);
        if (!png) {
          await rm(blob.file, { force: true });
          throw invalidArgument("artifacts", `${a.name} is not a PNG`);
        }
        dims = png;
      } else if (a.mimeType === "application/json" || a.mimeType === "text/plain") {
        // Text is masked here, before it is kept: the client may not know the session's secrets or its policy's rules.
        const text = this.maskClientFile(session, a.mimeType, await readFile(blob.file, "utf8"));
        if (text !== undefined) {
          const masked = Buffer.from(text, "utf8");
          await writeFile(blob.file, masked, { mode: 0o600 });
          sha256 = createHash("sha256").update(masked).digest("hex");
          size = masked.length;
        }
      }
      await this.deps.images.adoptFile(blob.file, sha256, a.mimeType);
      await this.deps.steps.addImage({ sessionId, sha256, size, ...dims, mimeType: a.mimeType });
      // Counted as stored now (a failure before this leaves the hold to its expiry).
      await held.keep(size);
      artifacts.push({ name: a.name, kind: a.kind, provider: a.provider, sha256, size, mimeType: a.mimeType, ...(a.when ? { when: a.when } : {}), ...(req.action === "wait" && !req.ok ? { reason: "always" } : {}) });
    }
    // After the files: a screen one of them already is (a visual check's actual.png) is kept once, and counted once.
    const before = await this.keepClientShot(sessionId, req.before, owner, step.mask);
    const after = await this.keepClientShot(sessionId, req.after, owner, step.mask);
    const record: StepRecordV2 = {
      version: STEP_RECORD_VERSION,
      method: "farm.v1.SessionService/AppendSessionStep",
      action: req.action,
      description: req.description,
      arguments: req.arguments ?? {},
      result: { ok: req.ok, ...(req.errorCode ? { errorCode: req.errorCode } : {}), ...(req.errorMessage ? { errorMessage: req.errorMessage } : {}), response: req.response ?? {} },
      before,
      after,
      startedAt: req.startTime ?? step.startedAt,
      durationMs: req.durationMs,
      attempts: [],
      requestedBy: caller.tokenName,
      artifacts: [...artifacts, ...this.clientSkips(session, req, before, after)],
    };
    if (step.mask) maskRecord(record, step.mask);
    let ocr: StepOcrRecord | null = null;
    if (session.ocr) ocr = before.sha256 && this.deps.ocr ? { status: "pending", observations: [] } : { status: "skipped", observations: [], error: before.sha256 ? "OCR is not available on this coordinator" : "no before screenshot" };
    const stored = await this.deps.steps.append(sessionId, step.sequence, record, { failed: !req.ok, ocr });
    if (!stored) throw farmError(Errors.SESSION_NOT_FOUND, `no session ${sessionId}`, "session_id");
    if (ocr?.status === "pending" && before.sha256) this.deps.ocr?.queue(sessionId, step.sequence, before.sha256, step.mask);
    return stored.step;
  }

  /**
   * A client step's screenshot, kept like a routed step's (a PNG, counted
   * against the owner's quota), or recorded as missing with why: the
   * client's error, over quota, or none sent at all.
   */
  private async keepClientShot(sessionId: string, shot: ClientShotRequest | undefined, owner: string, mask: Redactor | undefined): Promise<StepImageRecord> {
    if (!shot) return { error: { code: Errors.NOT_IMPLEMENTED.code, message: "the client sent no screenshot with this step (a farm CLI older than this coordinator)" } };
    const base = shot.capturedAt !== undefined ? { capturedAt: shot.capturedAt } : {};
    if (shot.errorCode) return { ...base, error: { code: shot.errorCode, message: mask ? mask.text(shot.errorMessage) : shot.errorMessage } };
    if (shot.sha256) {
      const known = await this.deps.steps.image(sessionId, shot.sha256);
      if (!known || known.mimeType !== "image/png") return { ...base, error: { code: Errors.INVALID_ARGUMENT.code, message: `the client referred to screenshot ${shot.sha256}, which this session does not keep` } };
      return { ...base, sha256: known.sha256, width: known.width, height: known.height, size: known.size };
    }
    const { sha256 } = await this.deps.blobs.peek(shot.blobId, owner);
    const kept = await this.deps.steps.image(sessionId, sha256);
    if (kept && kept.mimeType === "image/png") {
      // A screen the session keeps already: not stored or counted again.
      await this.deps.blobs.remove(shot.blobId);
      return { ...base, sha256: kept.sha256, width: kept.width, height: kept.height, size: kept.size };
    }
    let held: FileReservation;
    try {
      held = await this.holdFile(sessionId, shot.blobId, owner);
    } catch (err) {
      const r = toErrorReport(err);
      if (r.code !== Errors.QUOTA_EXCEEDED.code) throw err;
      return { ...base, error: { code: r.code, message: r.message } };
    }
    try {
      const blob = await this.deps.blobs.take(shot.blobId, owner);
      const png = await pngSize(blob.file);
      if (!png) {
        await rm(blob.file, { force: true });
        return { ...base, error: { code: Errors.SCREENSHOT_NOT_PNG.code, message: "the client's screenshot is not a PNG; it was not kept" } };
      }
      await this.deps.images.adoptFile(blob.file, blob.sha256, "image/png");
      await this.deps.steps.addImage({ sessionId, sha256: blob.sha256, size: blob.size, ...png, mimeType: "image/png" });
      await held.keep(blob.size);
      return { ...base, sha256: blob.sha256, ...png, size: blob.size };
    } finally {
      await held.release();
    }
  }

  /**
   * The captures the session's policy keeps for this client step that a
   * step made in the CLI cannot have (an element tree, a device log, a
   * video: nothing ran on the agent around it), each disclosed as skipped
   * with its reason. Screenshot tokens are the step's before and after.
   */
  private clientSkips(session: SessionRow, req: ClientStepRequest, before: StepImageRecord, after: StepImageRecord): StepArtifactRecord[] {
    const plans = this.deps.plans;
    if (!plans) return [];
    const { compiled } = plans.policyOf(session);
    const screenChanged = Boolean(before.sha256 && after.sha256 && before.sha256 !== after.sha256);
    const out: StepArtifactRecord[] = [];
    for (const c of capturesFor(compiled, { action: req.action, targetId: "", screenChanged, failed: !req.ok }, "after")) {
      const lacks = CLIENT_STEP_LACKS[c.kind];
      if (!lacks) continue;
      out.push({
        name: lacks.name(c.when),
        kind: c.kind,
        provider: "coordinator",
        ...(c.when ? { when: c.when } : {}),
        reason: c.reason,
        skippedReason: `farm ${req.action === "wait" ? "wait" : "assert visual"} runs in the CLI, not around an action on the agent: a client step has no ${lacks.what}`,
      });
    }
    return out;
  }

  /** A screenshot the agent reported, kept in the store, or the reason it is not. */
  private async keep(sessionId: string, shot: StepShot, agentToken: string): Promise<StepImageRecord> {
    const capturedAt = shot.captureTime ? timestampMs(shot.captureTime) : undefined;
    const base = { ...(capturedAt !== undefined ? { capturedAt } : {}) };
    if (shot.error) return { ...base, error: { code: shot.error.detail?.code || Errors.INTERNAL.code, message: shot.error.message } };
    let held: FileReservation | undefined;
    try {
      if (!/^[0-9a-f]{64}$/.test(shot.sha256)) throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, "a step screenshot without a sha256");
      if (shot.blobId === "") {
        // Not uploaded again: only a screen this session already shows.
        const known = await this.deps.steps.image(sessionId, shot.sha256);
        const skipped = known ? undefined : this.overQuota.get(`${sessionId}/${shot.sha256}`);
        if (skipped) throw farmError(Errors.QUOTA_EXCEEDED, skipped, "quota");
        if (!known) throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, `the agent referred to screenshot ${shot.sha256}, which this session does not have`);
        return { ...base, sha256: known.sha256, width: known.width, height: known.height, size: known.size };
      }
      // Uploaded over the agent's own token (AgentBlobService), and only that upload counts.
      held = await this.holdFile(sessionId, shot.blobId, ownerOf({ kind: "agent", tokenName: agentToken }));
      const blob = await this.deps.blobs.take(shot.blobId, ownerOf({ kind: "agent", tokenName: agentToken }));
      if (blob.sha256 !== shot.sha256) {
        await this.deps.blobs.remove(shot.blobId);
        throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, `the screenshot's blob has sha256 ${blob.sha256}, the agent said ${shot.sha256}`);
      }
      await this.deps.images.adopt(blob.file, blob.sha256, { width: shot.width, height: shot.height });
      await this.deps.steps.addImage({ sessionId, sha256: blob.sha256, size: blob.size, width: shot.width, height: shot.height, mimeType: "image/png" });
      await held.keep(blob.size);
      return { ...base, sha256: blob.sha256, width: shot.width, height: shot.height, size: blob.size };
    } catch (err) {
      const r = toErrorReport(err);
      if (r.code === Errors.QUOTA_EXCEEDED.code && shot.blobId !== "") {
        this.overQuota.set(`${sessionId}/${shot.sha256}`, r.message);
        if (this.overQuota.size > 256) this.overQuota.delete(this.overQuota.keys().next().value as string);
      }
      this.deps.log.warn("a step screenshot was not kept", { sessionId, code: r.code, error: r.message });
      return { ...base, error: { code: r.code, message: r.message } };
    } finally {
      await held?.release();
    }
  }

  /**
   * Holds a session file's bytes (a blob of `blobOwner`) against the
   * session owner's quota until it is stored and kept (counted in their
   * total); over quota: QUOTA_EXCEEDED, and the blob is dropped.
   */
  private async holdFile(sessionId: string, blobId: string, blobOwner: string): Promise<FileReservation> {
    if (!this.deps.quota) return { id: "", bytes: 0, release: async () => undefined, keep: async () => undefined };
    const { size } = await this.deps.blobs.peek(blobId, blobOwner);
    const { owner } = await this.deps.sessions.get(sessionId);
    try {
      return await this.deps.quota.reserveFiles(owner, size);
    } catch (err) {
      await this.deps.blobs.remove(blobId);
      throw err;
    }
  }
}
