import { rm } from "node:fs/promises";
import { create } from "@bufbuild/protobuf";
import { toErrorReport } from "@farm/shared/errors";
import { StepArtifactReportSchema, type StepArtifactReport, type StepCapture } from "@farm/shared/gen/farm/v1/agent_service_pb";
import type { Redactor } from "@farm/shared/redaction/redactor";
import { captureTokenProblem, parseCaptureToken, type CaptureWhen } from "@farm/shared/capture-policy/capture-token";
import type { EvidenceDeps } from "../evidence/capture-command.js";
import { putBlob, putBlobBytes } from "../uplink/blob-transfer.js";
import { readUiTree } from "../ui/read-ui-tree.js";
import { startDeviceLog, type DeviceLogInterval } from "./device-log.js";
import { startStepVideo, type StepVideo } from "./step-video.js";

/** A capture asked for: its kind and when, and the token as the coordinator sent it (the artifact answers to it). */
interface Token {
  token: string;
  kind: string;
  when: CaptureWhen;
}

/** The evidence of one step beyond its baseline screenshots, started before the action. */
export interface StepCaptures {
  /** Ends what is running and collects every artifact, skipped ones included. */
  finish(untilMs: number): Promise<StepArtifactReport[]>;
}

export interface CaptureDeps {
  evidence: EvidenceDeps;
  /** Masks what is stored; built from the step's Redaction. */
  redactor: Redactor;
}

/**
 * Starts the captures a step asked for (StepCapture.captures): UI trees
 * before, the device log's window; after the action, UI trees after and
 * the log. Every file is masked here, before it leaves this host, and a
 * kind that cannot be supplied is reported as skipped, never left out.
 */
export async function beginCaptures(deps: CaptureDeps, serial: string, step: StepCapture, untilMs: number): Promise<StepCaptures> {
  const reports: StepArtifactReport[] = [];
  const tokens: Token[] = [];
  for (const t of step.captures) {
    // The coordinator checked them; a token this agent does not know is disclosed, not dropped.
    const problem = captureTokenProblem(t);
    const parsed = problem ? null : parseCaptureToken(t);
    if (problem) reports.push(report({ name: t, kind: t.split(".")[0] ?? t, provider: "agent", token: t, skippedReason: problem }));
    else if (parsed) tokens.push({ token: t, kind: parsed.kind, when: parsed.when });
  }
  /** Sends (masked) text as a blob and reports it; a failed upload is a dropped artifact. */
  const upload = async (t: Token, name: string, provider: string, mimeType: string, body: string, when: string, warning?: string) => {
    try {
      const blob = await putBlobBytes(deps.evidence.transport, deps.evidence.stagingDir, Buffer.from(body, "utf8"), name);
      reports.push(report({ blobId: blob.blobId, sha256: blob.sha256, size: BigInt(blob.size), mimeType, name, kind: t.kind, provider, token: t.token, when, ...(warning ? { warning } : {}) }));
    } catch (err) {
      reports.push(report({ name, kind: t.kind, provider, token: t.token, when, warning: `dropped: ${toErrorReport(err).message}` }));
    }
  };
  const elements = async (t: Token, when: "before" | "after") => {
    try {
      const tree = await readUiTree(deps.evidence.adb, serial, "", untilMs);
      const masked = { source: tree.source, nodeCount: tree.nodeCount, roots: deps.redactor.uiTree(tree.roots) };
      await upload(t, `elements.${when}.json`, "agent", "application/json", JSON.stringify(masked), when);
    } catch (err) {
      reports.push(report({ name: `elements.${when}.json`, kind: t.kind, provider: "agent", token: t.token, when, warning: `dropped: ${toErrorReport(err).message}` }));
    }
  };

  let log: { token: Token; interval?: DeviceLogInterval; error?: string } | undefined;
  let video: { token: Token; recording?: StepVideo; error?: string } | undefined;
  for (const t of tokens) {
    // The baseline already keeps the screen before and after every step.
    if (t.kind === "screenshot") continue;
    if (t.kind === "elements" && t.when !== "after") await elements(t, "before");
    if (t.kind === "video" && !video) {
      try {
        video = { token: t, recording: await startStepVideo(deps.evidence.adb, serial, deps.evidence.stagingDir) };
      } catch (err) {
        video = { token: t, error: toErrorReport(err).message };
      }
    }
    if (t.kind === "deviceLog" && !log) {
      try {
        log = { token: t, interval: await startDeviceLog(deps.evidence.adb, serial, { filterspec: step.logFilterspec, package: step.logPackage, untilMs }) };
      } catch (err) {
        log = { token: t, error: toErrorReport(err).message };
      }
    }
  }

  return {
    async finish() {
      for (const t of tokens) if (t.kind === "elements" && t.when !== "before") await elements(t, "after");
      // An interval that never started supplied nothing (skipped, with why); one that started and could not be finished is dropped with a warning.
      if (log?.error) reports.push(report({ name: "device.log", kind: "deviceLog", provider: "adb", token: log.token.token, when: "around", skippedReason: `the log could not be started: ${log.error}` }));
      else if (log?.interval) {
        const r = await log.interval.stop();
        if (r.text === undefined) reports.push(report({ name: "device.log", kind: "deviceLog", provider: "adb", token: log.token.token, when: "around", warning: r.warning ?? "dropped" }));
        else await upload(log.token, "device.log", "adb", "text/plain", deps.redactor.text(r.text), "around", r.truncated ? "cut at 16 MiB" : undefined);
      }
      if (video?.error) reports.push(report({ name: "video.mp4", kind: "video", provider: "adb", token: video.token.token, when: "around", skippedReason: video.error }));
      else if (video?.recording) {
        const v = await video.recording.stop();
        const base = { name: "video.mp4", kind: "video", provider: "adb", token: video.token.token, when: "around" };
        if (!v.file) reports.push(report({ ...base, warning: v.warning ?? "dropped" }));
        else {
          // Sent from the file it was pulled into: a video is not held in memory.
          try {
            const blob = await putBlob(deps.evidence.transport, v.file, "video.mp4");
            reports.push(report({ ...base, blobId: blob.blobId, sha256: blob.sha256, size: BigInt(blob.size), mimeType: "video/mp4" }));
          } catch (err) {
            reports.push(report({ ...base, warning: `dropped: ${toErrorReport(err).message}` }));
          } finally {
            await rm(v.file, { force: true });
          }
        }
      }
      return reports;
    },
  };
}

function report(init: Omit<Partial<StepArtifactReport>, "$typeName"> & { name: string; kind: string; provider: string; token: string }): StepArtifactReport {
  return create(StepArtifactReportSchema, init);
}
