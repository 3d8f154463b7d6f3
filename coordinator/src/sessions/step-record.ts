import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Errors } from "@farm/shared/error-codes";

/** The record version this coordinator writes. */
export const STEP_RECORD_VERSION = 2;

/** A screenshot in a step: stored (sha256), failed (error), or a still bundle's file (legacy). */
export interface StepImageRecord {
  sha256?: string;
  width?: number;
  height?: number;
  size?: number;
  capturedAt?: number;
  error?: { code: string; message: string };
  evidenceId?: string;
  path?: string;
}

export interface StepResultRecord {
  ok: boolean;
  errorCode?: string;
  errorMessage?: string;
  errorField?: string;
  /** null: unknown. */
  dispatched?: boolean | null;
  ambiguous?: boolean;
  actionId?: string;
  exitCode?: number;
  outputExcerpt?: string;
  /** The method's response as protobuf JSON, long strings cut. */
  response?: JsonObject;
}

/** Evidence kept with a step beyond its two screenshots, or a kind that could not be supplied. */
export interface StepArtifactRecord {
  name: string;
  kind: string;
  /** agent, adb, app-sdk, runner or coordinator. */
  provider: string;
  sha256?: string;
  size?: number;
  mimeType?: string;
  when?: string;
  skippedReason?: string;
  warning?: string;
  /** Which rule asked for it. */
  reason?: string;
  /** Captured before the outcome that keeps it was known (a post-hoc rule's), and kept because that rule fired. */
  speculative?: boolean;
}

export interface StepAttemptRecord {
  startedAt: number;
  durationMs: number;
  errorCode: string;
  errorMessage: string;
}

/** Version 2: one action with the screen before and after it. */
export interface StepRecordV2 {
  version: 2;
  method: string;
  action: string;
  description: string;
  arguments: JsonObject;
  result: StepResultRecord;
  before: StepImageRecord | null;
  after: StepImageRecord | null;
  startedAt: number;
  durationMs: number;
  attempts: StepAttemptRecord[];
  requestedBy: string;
  /** Absent in records written before artifacts existed: none. */
  artifacts?: StepArtifactRecord[];
}

/**
 * Version 1, the earlier shape: one screenshot, taken after whatever
 * happened, as a path (`evidence/<id>/<file>` in the coordinator's store).
 * Still captures in a session are attached this way.
 */
export interface StepRecordV1 {
  screenshotPath: string;
  action?: string;
  description?: string;
  time?: number;
  requestedBy?: string;
}

/** A stored step as every reader sees it, whatever version it was written in. */
export interface StepView extends Omit<StepRecordV2, "version" | "artifacts"> {
  recordVersion: number;
  artifacts: StepArtifactRecord[];
}

const legacyPath = /^evidence\/([0-9a-f-]{36})\/([A-Za-z0-9._-]+)$/;

/**
 * Reads a stored record of any version. A record that does not parse, or
 * of a version this coordinator does not know, still reads: as a failed step
 * that says why, never as an exception that would hide the rest of the
 * timeline.
 */
export function readStepRecord(text: string, createdAt: number): StepView {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    return unreadable(0, createdAt, `the stored record is not JSON: ${(err as Error).message}`);
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return unreadable(0, createdAt, "the stored record is not a JSON object");
  const r = raw as Record<string, unknown>;
  if (r["version"] === undefined && typeof r["screenshotPath"] === "string") return fromV1(r as unknown as StepRecordV1, createdAt);
  if (r["version"] === 2) {
    const v = r as unknown as StepRecordV2;
    return {
      recordVersion: 2,
      method: str(v.method),
      action: str(v.action),
      description: str(v.description),
      arguments: obj(v.arguments),
      result: typeof v.result === "object" && v.result !== null ? v.result : { ok: false, errorMessage: "the stored record has no result" },
      before: v.before ?? null,
      after: v.after ?? null,
      startedAt: num(v.startedAt, createdAt),
      durationMs: num(v.durationMs, 0),
      attempts: Array.isArray(v.attempts) ? v.attempts : [],
      requestedBy: str(v.requestedBy),
      artifacts: Array.isArray(v.artifacts) ? v.artifacts : [],
    };
  }
  return unreadable(typeof r["version"] === "number" ? r["version"] : 0, createdAt, `record version ${String(r["version"])} is newer than this coordinator reads`);
}

function fromV1(v: StepRecordV1, createdAt: number): StepView {
  const m = legacyPath.exec(v.screenshotPath);
  const after: StepImageRecord = m
    ? { evidenceId: m[1] as string, path: m[2] as string }
    : { error: { code: Errors.NOT_FOUND.code, message: `the screenshot path ${JSON.stringify(v.screenshotPath.slice(0, 200))} is not in the evidence store` } };
  return {
    recordVersion: 1,
    method: "",
    action: str(v.action) || "screenshot",
    description: str(v.description) || "screenshot",
    arguments: {},
    // The earlier shape kept no outcome: nothing is claimed beyond the image.
    result: { ok: true },
    before: null,
    after,
    startedAt: num(v.time, createdAt),
    durationMs: 0,
    attempts: [],
    requestedBy: str(v.requestedBy),
    artifacts: [],
  };
}

function unreadable(version: number, createdAt: number, why: string): StepView {
  return {
    recordVersion: version,
    method: "",
    action: "unreadable",
    description: why,
    arguments: {},
    result: { ok: false, errorCode: Errors.INTERNAL.code, errorMessage: why },
    before: null,
    after: null,
    startedAt: createdAt,
    durationMs: 0,
    attempts: [],
    requestedBy: "",
    artifacts: [],
  };
}

const str = (v: unknown): string => (typeof v === "string" ? v : "");
const num = (v: unknown, fallback: number): number => (typeof v === "number" && Number.isFinite(v) ? v : fallback);
const obj = (v: unknown): JsonObject => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as JsonObject) : {});

/** Strings longer than this are cut in stored responses and arguments. */
export const MAX_STORED_STRING = 4096;
/** A response larger than this as JSON is replaced by a note saying so. */
export const MAX_STORED_RESPONSE_BYTES = 2 * 1024 * 1024;

/** A copy with every long string cut (and saying by how much). */
export function cutStrings(value: JsonValue, max = MAX_STORED_STRING): JsonValue {
  if (typeof value === "string") return value.length <= max ? value : `${value.slice(0, max)}…[${value.length - max} more characters]`;
  if (Array.isArray(value)) return value.map((v) => cutStrings(v, max));
  if (value !== null && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, cutStrings(v, max)]));
  return value;
}
