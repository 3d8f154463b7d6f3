import { createHash, randomUUID } from "node:crypto";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { toErrorReport } from "@farm/shared/errors";
import { StepArtifactReportSchema, type StepArtifactReport, type StepCapture } from "@farm/shared/gen/farm/v1/agent_service_pb";
import type { Redactor } from "@farm/shared/redaction/redactor";
import type { EvidenceDeps } from "../evidence/capture-command.js";
import { putBlob } from "../uplink/blob-transfer.js";
import { readUiTree } from "../ui/read-ui-tree.js";
import { startDeviceLog, type DeviceLogInterval } from "./device-log.js";
import { startStepVideo, type StepVideo } from "./step-video.js";

type When = "before" | "after" | "around";
interface Token {
  token: string;
  kind: string;
  when: When;
}

const INSTANT = new Set(["screenshot", "elements"]);
const INTERVAL = new Set(["video", "deviceLog"]);

/** `kind[.modifier]` with the defaults: instant kinds after, interval kinds around. */
export function parseCaptureToken(token: string): Token | { token: string; error: string } {
  const [kind = "", when, ...rest] = token.split(".");
  if (rest.length > 0 || !(INSTANT.has(kind) || INTERVAL.has(kind) || kind === "actionLog")) return { token, error: `unknown capture ${JSON.stringify(token)}` };
  const w = when ?? (INTERVAL.has(kind) ? "around" : "after");
  if (w !== "before" && w !== "after" && w !== "around") return { token, error: `unknown modifier in ${JSON.stringify(token)} (before, after or around)` };
  if (INTERVAL.has(kind) && w !== "around") return { token, error: `${kind} is an interval: only ${kind}.around` };
  return { token, kind, when: w };
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
    const parsed = parseCaptureToken(t);
    if ("error" in parsed) reports.push(report({ name: t, kind: t.split(".")[0] ?? t, provider: "agent", token: t, skippedReason: parsed.error }));
    else tokens.push(parsed);
  }
  const upload = (t: Token, name: string, provider: string, mimeType: string, body: string, when: string, warning?: string) =>
    uploadBody(t, name, provider, mimeType, Buffer.from(body, "utf8"), when, warning);
  const uploadBody = async (t: Token, name: string, provider: string, mimeType: string, body: Buffer, when: string, warning?: string) => {
    try {
      reports.push(report({ ...(await uploadBytes(deps.evidence, name, mimeType, body)), name, kind: t.kind, provider, token: t.token, when, ...(warning ? { warning } : {}) }));
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
    if (t.kind === "screenshot" || t.kind === "actionLog") continue;
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
        if (!v.bytes) reports.push(report({ name: "video.mp4", kind: "video", provider: "adb", token: video.token.token, when: "around", warning: v.warning ?? "dropped" }));
        else await uploadBody(video.token, "video.mp4", "adb", "video/mp4", v.bytes, "around");
      }
      return reports;
    },
  };
}

function report(init: Omit<Partial<StepArtifactReport>, "$typeName"> & { name: string; kind: string; provider: string; token: string }): StepArtifactReport {
  return create(StepArtifactReportSchema, init);
}

/** Sends a (masked) file as a blob, through a 0600 staging file. */
async function uploadBytes(evidence: EvidenceDeps, name: string, mimeType: string, bytes: Buffer): Promise<{ blobId: string; sha256: string; size: bigint; mimeType: string }> {
  await mkdir(evidence.stagingDir, { recursive: true, mode: 0o700 });
  const file = join(evidence.stagingDir, `artifact-${randomUUID()}`);
  try {
    await writeFile(file, bytes, { mode: 0o600 });
    const blob = await putBlob(evidence.transport, file, name);
    if (blob.sha256 !== createHash("sha256").update(bytes).digest("hex")) throw new Error("the staged file changed while it was sent");
    return { blobId: blob.blobId, sha256: blob.sha256, size: BigInt(blob.size), mimeType };
  } finally {
    await rm(file, { force: true });
  }
}
