import type { Size } from "@farm/shared/video-options";
import { runBounded, type BoundedRun } from "./bounded-process.js";
import type { ManifestErrorCode } from "@farm/shared/evidence-manifest";

export const PROBE_DEADLINE_MS = 10_000;
export const DECODE_DEADLINE_MS = 120_000;
/** Combined stdout + stderr a media subprocess may write before it is killed. */
export const MEDIA_OUTPUT_CAP = 16 * 1024 * 1024;
const MAX_ALLOC_BYTES = 256 * 1024 * 1024;

export interface MediaTools {
  ffmpeg: string;
  ffprobe: string;
}

/** $FFMPEG / $FFPROBE, else the tools on PATH. */
export function mediaTools(env: NodeJS.ProcessEnv = process.env): MediaTools {
  return { ffmpeg: env["FFMPEG"] || "ffmpeg", ffprobe: env["FFPROBE"] || "ffprobe" };
}

export interface MediaProbe {
  codec: string;
  width: number;
  height: number;
  durationMs: number;
}

export interface MediaProblem {
  code: ManifestErrorCode;
  stage: "probe" | "decode";
  message: string;
}

export interface MediaVerification {
  ok: boolean;
  /** What the probe found, kept even when verification fails. */
  probe: Partial<MediaProbe> | null;
  frames: number | null;
  problems: MediaProblem[];
  probeMs: number;
  decodeMs: number;
}

/** Tool sets found working; a failure is not remembered, so installing ffmpeg needs no restart. */
const working = new Set<string>();

/** Checks both tools run at all; the answer names the missing one. */
export async function checkMediaTools(tools: MediaTools): Promise<string | null> {
  const key = `${tools.ffmpeg}\u0000${tools.ffprobe}`;
  if (working.has(key)) return null;
  for (const [name, bin] of [["ffmpeg", tools.ffmpeg], ["ffprobe", tools.ffprobe]] as const) {
    const r = await runBounded(bin, ["-version"], { deadlineMs: 10_000, maxOutputBytes: MEDIA_OUTPUT_CAP });
    if (r.spawnError || r.exitCode !== 0) return `${name} (${bin}) is not usable on this host: ${r.spawnError ?? `exit ${r.exitCode}`}; install ffmpeg (it provides both)`;
  }
  working.add(key);
  return null;
}

function failure(r: BoundedRun, what: string, deadlineMs: number): string | null {
  if (r.spawnError) return `${what} could not start: ${r.spawnError}`;
  if (r.timedOut) return `${what} passed its ${deadlineMs / 1000} s deadline and was killed`;
  if (r.overflowed) return `${what} wrote more than ${MEDIA_OUTPUT_CAP} bytes of output and was killed`;
  return null;
}

/** ffprobe: codec, dimensions and duration of the first video stream. */
export async function probeVideo(file: string, tools: MediaTools): Promise<{ probe: Partial<MediaProbe> | null; problem?: MediaProblem; ms: number }> {
  const r = await runBounded(
    tools.ffprobe,
    ["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=codec_name,width,height,duration,nb_frames:format=duration", "-of", "json", file],
    { deadlineMs: PROBE_DEADLINE_MS, maxOutputBytes: MEDIA_OUTPUT_CAP },
  );
  const killed = failure(r, "ffprobe", PROBE_DEADLINE_MS);
  if (killed) return { probe: null, problem: { code: "VIDEO_PROBE_FAILED", stage: "probe", message: killed }, ms: r.durationMs };
  let parsed: { streams?: { codec_name?: string; width?: number; height?: number; duration?: string; nb_frames?: string }[]; format?: { duration?: string } } = {};
  try {
    parsed = JSON.parse(r.stdout || "{}") as typeof parsed;
  } catch {
    // Reported below as an unreadable probe.
  }
  const stream = parsed.streams?.[0];
  // One frame is one instant: its nominal length is the muxer's default
  // frame duration, not recorded time, so the timeline counts as zero.
  const seconds = stream?.nb_frames === "1" ? 0 : Number(stream?.duration ?? parsed.format?.duration ?? NaN);
  const probe: Partial<MediaProbe> = {
    ...(stream?.codec_name ? { codec: stream.codec_name } : {}),
    ...(stream?.width ? { width: stream.width } : {}),
    ...(stream?.height ? { height: stream.height } : {}),
    ...(Number.isFinite(seconds) ? { durationMs: Math.round(seconds * 1000) } : {}),
  };
  if (r.exitCode !== 0 || !stream) {
    const why = r.stderr.trim().split("\n").slice(-3).join(" ") || `exit ${r.exitCode}`;
    return { probe: stream ? probe : null, problem: { code: "VIDEO_PROBE_FAILED", stage: "probe", message: `ffprobe found no readable video stream: ${why}` }, ms: r.durationMs };
  }
  return { probe, ms: r.durationMs };
}

/**
 * Decodes the first video stream through its final frame into a null
 * output: success needs exit 0, an end-of-stream progress report with at
 * least one frame, and no error diagnostics. Two decoder threads, one output
 * thread, 256 MiB largest single allocation; decoded frames never reach Node.
 */
export async function decodeVideo(file: string, tools: MediaTools): Promise<{ frames: number | null; problem?: MediaProblem; ms: number }> {
  const r = await runBounded(
    tools.ffmpeg,
    [
      "-nostdin",
      "-hide_banner",
      "-nostats",
      "-v",
      "error",
      "-xerror",
      "-max_alloc",
      String(MAX_ALLOC_BYTES),
      "-threads",
      "2",
      "-i",
      file,
      "-map",
      "0:v:0",
      "-threads",
      "1",
      "-filter_threads",
      "1",
      "-f",
      "null",
      "-progress",
      "pipe:1",
      "-",
    ],
    { deadlineMs: DECODE_DEADLINE_MS, maxOutputBytes: MEDIA_OUTPUT_CAP },
  );
  const killed = failure(r, "ffmpeg decode", DECODE_DEADLINE_MS);
  if (killed) return { frames: null, problem: { code: "VIDEO_DECODE_FAILED", stage: "decode", message: killed }, ms: r.durationMs };
  const frameLines = [...r.stdout.matchAll(/^frame=(\d+)$/gm)];
  const frames = frameLines.length > 0 ? Number(frameLines[frameLines.length - 1]![1]) : null;
  const ended = /^progress=end$/m.test(r.stdout);
  const diagnostics = r.stderr.trim();
  if (r.exitCode !== 0 || !ended || diagnostics !== "" || !frames) {
    const why = [
      r.exitCode !== 0 ? `exit ${r.exitCode ?? r.signal}` : null,
      ended ? null : "no end-of-stream report",
      frames ? null : "no decoded frame",
      diagnostics ? `diagnostics: ${diagnostics.split("\n").slice(0, 3).join(" | ")}` : null,
    ].filter(Boolean);
    return { frames, problem: { code: "VIDEO_DECODE_FAILED", stage: "decode", message: `full decode failed: ${why.join("; ")}` }, ms: r.durationMs };
  }
  return { frames, ms: r.durationMs };
}

/**
 * The whole check a recording must pass before it may be called video.mp4:
 * probe (codec, the requested dimensions, a positive duration), then a full
 * decode. Probe facts are kept even when a later step fails.
 */
export async function verifyVideo(file: string, expected: Size, tools: MediaTools): Promise<MediaVerification> {
  const problems: MediaProblem[] = [];
  const p = await probeVideo(file, tools);
  if (p.problem) return { ok: false, probe: p.probe, frames: null, problems: [p.problem], probeMs: p.ms, decodeMs: 0 };
  const probe = p.probe ?? {};
  if (probe.width !== expected.width || probe.height !== expected.height) {
    problems.push({ code: "VIDEO_SIZE_MISMATCH", stage: "probe", message: `the encoder produced ${probe.width}x${probe.height}, not the requested ${expected.width}x${expected.height}` });
  }
  if (!probe.codec) problems.push({ code: "VIDEO_PROBE_FAILED", stage: "probe", message: "no codec reported for the video stream" });
  if (!(probe.durationMs !== undefined && probe.durationMs > 0)) {
    problems.push({ code: "VIDEO_EMPTY", stage: "probe", message: `the media timeline is ${probe.durationMs ?? "unknown"} ms long; an idle screen may give a single frame and no duration` });
  }
  // Decode even when the probe found a problem: its result is recorded too.
  const d = await decodeVideo(file, tools);
  if (d.problem) problems.push(d.problem);
  return { ok: problems.length === 0, probe, frames: d.frames, problems, probeMs: p.ms, decodeMs: d.ms };
}
