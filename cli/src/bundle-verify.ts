import { execFile } from "node:child_process";
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import sharp from "sharp";
import type { EvidenceArtifact, EvidenceManifest } from "@farm/shared/evidence-manifest";
import { manifestSchemaErrors } from "@farm/shared/evidence-manifest-validate";
import { sha256File } from "@farm/shared/verified-file";

export interface VerifyReport {
  ok: boolean;
  evidenceId: string | null;
  status: string | null;
  checked: number;
  problems: string[];
}

/** The agent's decoding limit for screenshots; verify holds files to the same. */
const PNG_MAX_PIXELS = 32_000_000;
const PROBE_DEADLINE_MS = 10_000;
const PROBE_OUTPUT_CAP = 16 * 1024 * 1024;

/**
 * Offline check of a bundle directory: the manifest parses and matches
 * schema version 1, every artifact it lists exists with exactly the
 * recorded size and sha256, and what is called complete really is: a
 * screenshot decodes as a PNG of the recorded display size, a video probes
 * with the recorded codec and size. A hash only proves the bytes did not
 * change since the manifest was written, not that they are what it says.
 * A session export (manifest kind "farm-session-export") is checked by
 * session-export-verify.ts instead.
 */
/** `env`: the run's environment (FFPROBE names the ffprobe to run). */
export async function verifyBundle(dir: string, env: NodeJS.ProcessEnv = process.env): Promise<VerifyReport> {
  const problems: string[] = [];
  let manifest: EvidenceManifest;
  try {
    manifest = JSON.parse(await readFile(join(dir, "manifest.json"), "utf8")) as EvidenceManifest;
  } catch (err) {
    return { ok: false, evidenceId: null, status: null, checked: 0, problems: [`manifest.json: ${(err as Error).message}`] };
  }
  // A session export (`farm session export`) has its own manifest and checks.
  if ((manifest as { kind?: unknown } | null)?.kind === "farm-session-export") return (await import("./session-export-verify.js")).verifySessionExport(dir);
  problems.push(...manifestSchemaErrors(manifest).map((p) => `manifest.json: ${p}`));
  let checked = 0;
  for (const a of Array.isArray(manifest.artifacts) ? manifest.artifacts : []) {
    if (a.path === null || typeof a.path !== "string") continue;
    if (!/^[A-Za-z0-9._-]+$/.test(a.path)) {
      problems.push(`${a.path}: not a plain bundle file name`);
      continue;
    }
    const file = join(dir, a.path);
    try {
      const s = await stat(file);
      const before = problems.length;
      if (s.size !== a.bytes) problems.push(`${a.path}: ${s.size} bytes, manifest says ${a.bytes}`);
      const sha = await sha256File(file);
      if (sha !== a.sha256) problems.push(`${a.path}: sha256 ${sha}, manifest says ${a.sha256}`);
      // Content is judged only for bytes that are the recorded ones, and only
      // where the manifest claims completeness (partial files are kept as is).
      if (problems.length === before && a.status === "complete") {
        const wrong = await contentProblem(manifest, a, file, env);
        if (wrong) problems.push(`${a.path}: ${wrong}`);
      }
      checked++;
    } catch (err) {
      problems.push(`${a.path}: ${(err as NodeJS.ErrnoException).code === "ENOENT" ? "missing" : (err as Error).message}`);
    }
  }
  return { ok: problems.length === 0, evidenceId: manifest.evidenceId ?? null, status: manifest.status ?? null, checked, problems };
}

async function contentProblem(manifest: EvidenceManifest, a: EvidenceArtifact, file: string, env: NodeJS.ProcessEnv): Promise<string | null> {
  if (a.kind === "screenshot") return screenshotProblem(manifest, file);
  if (a.kind === "video") return videoProblem(manifest, file, env);
  return null;
}

/** A complete screenshot decodes in full as a PNG of the recorded display size. */
async function screenshotProblem(manifest: EvidenceManifest, file: string): Promise<string | null> {
  let width: number;
  let height: number;
  try {
    const meta = await sharp(file, { limitInputPixels: PNG_MAX_PIXELS }).metadata();
    if (meta.format !== "png") return `complete screenshot is not a PNG (${meta.format ?? "unknown format"})`;
    // Decoding every row catches truncated or corrupt pixel data a header read would miss.
    const { info } = await sharp(file, { limitInputPixels: PNG_MAX_PIXELS, failOn: "warning" }).raw().toBuffer({ resolveWithObject: true });
    if (info.width !== meta.width || info.height !== meta.height) return `complete screenshot's PNG header says ${meta.width}x${meta.height} but it decodes to ${info.width}x${info.height}`;
    ({ width, height } = info);
  } catch (err) {
    return `complete screenshot does not decode as a PNG: ${(err as Error).message}`;
  }
  const display = manifest.device?.display;
  if (!display) return null;
  if (width === display.width && height === display.height) return null;
  // The recorded size is the natural (portrait) one; a rotated screen is captured sideways.
  const sideways = display.rotation === 1 || display.rotation === 3 || display.rotation === null;
  if (sideways && width === display.height && height === display.width) return null;
  return `complete screenshot is ${width}x${height}, the manifest records a ${display.width}x${display.height} display (rotation ${display.rotation ?? "unknown"})`;
}

/** A complete video probes (ffprobe) with the recorded codec and size. */
async function videoProblem(manifest: EvidenceManifest, file: string, env: NodeJS.ProcessEnv): Promise<string | null> {
  const recorded = manifest.video;
  if (!recorded?.codec || !recorded.actualSize) return "complete video, but the manifest records no codec or size to check it against";
  const ffprobe = env["FFPROBE"] || "ffprobe";
  let stdout: string;
  try {
    ({ stdout } = await promisify(execFile)(
      ffprobe,
      ["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=codec_name,width,height", "-of", "json", file],
      { timeout: PROBE_DEADLINE_MS, maxBuffer: PROBE_OUTPUT_CAP, encoding: "utf8" },
    ));
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === "ENOENT") return `cannot check the video: ${ffprobe} is not installed (install ffmpeg)`;
    return `complete video does not probe: ${(e.stderr ?? "").trim().split("\n").slice(-2).join(" ") || e.message}`;
  }
  let stream: { codec_name?: string; width?: number; height?: number } | undefined;
  try {
    stream = (JSON.parse(stdout) as { streams?: (typeof stream)[] }).streams?.[0];
  } catch {
    stream = undefined;
  }
  if (!stream) return "complete video has no readable video stream";
  const got = `${stream.codec_name ?? "?"} ${stream.width ?? "?"}x${stream.height ?? "?"}`;
  const want = `${recorded.codec} ${recorded.actualSize.width}x${recorded.actualSize.height}`;
  return got === want ? null : `complete video probes as ${got}, the manifest records ${want}`;
}
