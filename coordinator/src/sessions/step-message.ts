import { create, type JsonObject } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { SessionStepSchema, type SessionStep, type StepImage } from "@farm/shared/gen/farm/v1/session_service_pb";
import type { Principal } from "../auth/token-store.js";
import { isTypedKey, maySeeCommand, redactCommand, redactSetprop, redactTyped } from "../routing/command-privacy.js";
import type { Summarizer } from "../auth/summary-key.js";
import type { StoredStep } from "./session-steps.js";
import type { StepImageRecord } from "./step-record.js";

/** A stored step in its wire form (as its caller and admins see it). */
export function stepMessage(s: StoredStep): SessionStep {
  const v = s.view;
  const r = v.result;
  return create(SessionStepSchema, {
    sessionId: s.sessionId,
    sequence: s.sequence,
    recordVersion: v.recordVersion,
    method: v.method,
    action: v.action,
    description: v.description,
    arguments: v.arguments,
    result: {
      ok: r.ok,
      errorCode: r.errorCode ?? "",
      errorMessage: r.errorMessage ?? "",
      errorField: r.errorField ?? "",
      ...(typeof r.dispatched === "boolean" ? { dispatched: r.dispatched } : {}),
      ambiguous: r.ambiguous ?? false,
      actionId: r.actionId ?? "",
      ...(typeof r.exitCode === "number" && Number.isFinite(r.exitCode) ? { exitCode: r.exitCode } : {}),
      outputExcerpt: r.outputExcerpt ?? "",
      ...(r.response ? { response: r.response } : {}),
    },
    ...(v.before ? { before: imageMessage(v.before) } : {}),
    ...(v.after ? { after: imageMessage(v.after) } : {}),
    startTime: timestampFromMs(v.startedAt),
    durationMs: Math.max(0, Math.round(v.durationMs)),
    attempts: v.attempts.map((a) => ({ startTime: timestampFromMs(a.startedAt), durationMs: Math.max(0, Math.round(a.durationMs)), errorCode: a.errorCode, errorMessage: a.errorMessage })),
    ...(s.ocr
      ? {
        ocr: {
          status: s.ocr.status,
          observations: s.ocr.observations.map((o) => ({ text: o.text, confidence: o.confidence, bounds: o.bounds })),
          error: s.ocr.error ?? "",
          durationMs: Math.max(0, Math.round(s.ocr.durationMs ?? 0)),
        },
      }
      : {}),
    requestedBy: v.requestedBy,
    artifacts: v.artifacts.map((a) => ({
      name: a.name,
      kind: a.kind,
      provider: a.provider,
      sha256: a.sha256 ?? "",
      size: BigInt(a.size ?? 0),
      mimeType: a.mimeType ?? "",
      when: a.when ?? "",
      skippedReason: a.skippedReason ?? "",
      warning: a.warning ?? "",
      reason: a.reason ?? "",
      speculative: a.speculative === true,
    })),
  });
}

function imageMessage(i: StepImageRecord): StepImage {
  return {
    $typeName: "farm.v1.StepImage",
    sha256: i.sha256 ?? "",
    width: i.width ?? 0,
    height: i.height ?? 0,
    size: BigInt(i.size ?? 0),
    ...(i.capturedAt !== undefined ? { captureTime: timestampFromMs(i.capturedAt) } : {}),
    errorCode: i.error?.code ?? "",
    errorMessage: i.error?.message ?? "",
    evidenceId: i.evidenceId ?? "",
    path: i.path ?? "",
  };
}

/**
 * A step as this viewer may see it. Commands, property values and typed
 * text may hold secrets: like the activity log, anyone but the caller and
 * admins sees a shell command's name and keyed hash (and no output), a
 * property's key and its value's keyed hash, typed text's length and keyed
 * hash. (The hook capture policies will extend.)
 */
export function stepFor(viewer: Principal, step: SessionStep, key: Summarizer): SessionStep {
  const kind = step.method.endsWith("/RunShell") ? "runShell" : step.method.endsWith("/SetProperty") ? "setProperty" : step.method.endsWith("/SendInput") ? "sendInput" : "";
  if (kind === "" || maySeeCommand(viewer, step.requestedBy)) return step;
  const args = (step.arguments ?? {}) as JsonObject;
  if (kind === "sendInput") return typedStepFor(step, args, key);
  const redacted: JsonObject = kind === "runShell"
    ? { command: redactCommand(String(args["command"] ?? ""), key), redacted: true }
    : { key: String(args["key"] ?? ""), value: redactSetprop(`=${String(args["value"] ?? "")}`, key).slice(1), redacted: true };
  const description = kind === "runShell" ? `shell ${redactCommand(String(args["command"] ?? ""), key)}` : `setprop ${String(args["key"] ?? "")}=${String(redacted["value"])}`;
  const result = step.result ? { ...step.result, outputExcerpt: "", response: undefined } : undefined;
  return create(SessionStepSchema, { ...step, arguments: redacted, description, ...(result ? { result } : {}) });
}

/** A SendInput step: typed text (or a key that may type) as its length and keyed hash; taps and swipes as they are. */
function typedStepFor(step: SessionStep, args: JsonObject, key: Summarizer): SessionStep {
  const text = typeof args["text"] === "string" ? args["text"] : undefined;
  const typedKey = typeof args["key"] === "string" && isTypedKey(args["key"]) ? args["key"] : undefined;
  const typed = text ?? typedKey;
  if (typed === undefined) return step;
  const summary = redactTyped(typed, key);
  const arguments_: JsonObject = text !== undefined ? { text: summary, redacted: true } : { key: summary, redacted: true };
  return create(SessionStepSchema, { ...step, arguments: arguments_, description: text !== undefined ? `type ${summary}` : `key ${summary}` });
}
