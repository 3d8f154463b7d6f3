import { lstat, readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import sharp from "sharp";
import { sha256File } from "@farm/shared/verified-file";
import type { VerifyReport } from "./bundle-verify.js";

/**
 * A session export (`farm session export ID DIR`):
 *
 *   manifest.json   { kind: "farm-session-export", schemaVersion: 1, sessionId, exportedAt, files: [...] }
 *   timeline.json   { kind: "farm-session-timeline", schemaVersion: 1, sessionId, exportedAt, session, steps }
 *   images/<sha256>.png               a screenshot from the session's store
 *   images/evidence-<id>-<file>       a still bundle's screenshot (version 1 steps)
 *
 * `session` and each of `steps` are protobuf JSON (farm.v1.Session,
 * farm.v1.SessionStep); a step's `before`/`after` that has a file in the
 * export carries its relative path as `file` (read a step back with
 * fromJson(SessionStepSchema, step, { ignoreUnknownFields: true })).
 */
export const SESSION_EXPORT_KIND = "farm-session-export";
export const SESSION_TIMELINE_KIND = "farm-session-timeline";

export interface SessionExportFile {
  /** "timeline.json" or "images/<name>". */
  path: string;
  bytes: number;
  sha256: string;
  mimeType: string;
  /** For image/png: the decoded size. */
  width?: number;
  height?: number;
}

export interface SessionExportManifest {
  kind: typeof SESSION_EXPORT_KIND;
  schemaVersion: 1;
  sessionId: string;
  exportedAt: string;
  files: SessionExportFile[];
}

const plainName = /^[A-Za-z0-9._-]+$/;
const shaPattern = /^[0-9a-f]{64}$/;
const storedImage = /^images\/([0-9a-f]{64})\.png$/;
/** The agent's decoding limit for screenshots; verify holds files to the same. */
const PNG_MAX_PIXELS = 32_000_000;

/** A name a bundle may use for a file: plain characters, not `.` or `..`. */
function isPlainName(name: string): boolean {
  return plainName.test(name) && name !== "." && name !== "..";
}

/** The export's name for a still bundle's file, or null when the two do not make a plain name. */
export function legacyImageName(evidenceId: string, path: string): string | null {
  const name = `evidence-${evidenceId}-${path}`;
  return evidenceId !== "" && isPlainName(evidenceId) && isPlainName(path) && isPlainName(name) ? name : null;
}

/** `timeline.json`, or `images/<plain name>`; nothing else may be listed. */
function isExportPath(path: string): boolean {
  if (path === "timeline.json") return true;
  const m = /^images\/(.+)$/.exec(path);
  return m !== null && isPlainName(m[1] as string);
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Offline check of a session export directory: the manifest is one, every
 * file it lists is a plain path that exists as a regular file with exactly
 * its size and sha256, a stored screenshot is named by its own sha256, every
 * PNG decodes in full at the listed size, timeline.json parses and each
 * screenshot it names is listed (with the sha256 the step records), and the
 * directory holds nothing the manifest does not list.
 */
export async function verifySessionExport(dir: string): Promise<VerifyReport> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(join(dir, "manifest.json"), "utf8"));
  } catch (err) {
    return { ok: false, evidenceId: null, status: null, checked: 0, problems: [`manifest.json: ${(err as Error).message}`] };
  }
  const problems: string[] = [];
  if (!isObject(raw)) return { ok: false, evidenceId: null, status: null, checked: 0, problems: ["manifest.json: not a JSON object"] };
  const sessionId = typeof raw["sessionId"] === "string" && raw["sessionId"] !== "" ? raw["sessionId"] : null;
  if (raw["kind"] !== SESSION_EXPORT_KIND) problems.push(`manifest.json: kind is ${JSON.stringify(raw["kind"])}, not "${SESSION_EXPORT_KIND}"`);
  if (raw["schemaVersion"] !== 1) problems.push(`manifest.json: schemaVersion ${JSON.stringify(raw["schemaVersion"])} is not 1`);
  if (sessionId === null) problems.push("manifest.json: sessionId is missing");
  if (typeof raw["exportedAt"] !== "string" || Number.isNaN(Date.parse(raw["exportedAt"]))) problems.push("manifest.json: exportedAt is not a time");
  if (!Array.isArray(raw["files"])) {
    problems.push("manifest.json: files is not a list");
    return { ok: false, evidenceId: sessionId, status: null, checked: 0, problems };
  }

  // Each listed file, by path: what the manifest says about it, once checked.
  const listed = new Map<string, SessionExportFile>();
  let checked = 0;
  for (const [i, f] of (raw["files"] as unknown[]).entries()) {
    if (!isObject(f) || typeof f["path"] !== "string") {
      problems.push(`manifest.json: files[${i}] has no path`);
      continue;
    }
    const path = f["path"];
    if (!isExportPath(path)) {
      problems.push(`${path}: not a plain export path (timeline.json or images/NAME)`);
      continue;
    }
    if (listed.has(path)) {
      problems.push(`${path}: listed twice`);
      continue;
    }
    const entry = f as unknown as SessionExportFile;
    listed.set(path, entry);
    const before = problems.length;
    if (!Number.isSafeInteger(entry.bytes) || entry.bytes < 0) problems.push(`${path}: bytes ${JSON.stringify(entry.bytes)} is not a size`);
    if (typeof entry.sha256 !== "string" || !shaPattern.test(entry.sha256)) problems.push(`${path}: sha256 ${JSON.stringify(entry.sha256)} is not one`);
    if (typeof entry.mimeType !== "string" || entry.mimeType === "") problems.push(`${path}: no mimeType`);
    const named = storedImage.exec(path);
    if (named && named[1] !== entry.sha256) problems.push(`${path}: a stored screenshot is named by its sha256, the manifest says ${entry.sha256}`);
    if (named && entry.mimeType !== "image/png") problems.push(`${path}: a stored screenshot is image/png, the manifest says ${entry.mimeType}`);
    if (problems.length > before) continue;
    const file = join(dir, path);
    try {
      const s = await lstat(file);
      if (!s.isFile()) {
        problems.push(`${path}: not a regular file`);
        continue;
      }
      if (s.size !== entry.bytes) problems.push(`${path}: ${s.size} bytes, manifest says ${entry.bytes}`);
      const sha = await sha256File(file);
      if (sha !== entry.sha256) problems.push(`${path}: sha256 ${sha}, manifest says ${entry.sha256}`);
      // Content is judged only for bytes that are the recorded ones.
      if (problems.length === before && entry.mimeType === "image/png") {
        const wrong = await pngProblem(file, entry);
        if (wrong) problems.push(`${path}: ${wrong}`);
      }
      checked++;
    } catch (err) {
      problems.push(`${path}: ${(err as NodeJS.ErrnoException).code === "ENOENT" ? "missing" : (err as Error).message}`);
    }
  }

  let running = false;
  if (!listed.has("timeline.json")) problems.push("timeline.json: not listed in the manifest");
  else {
    const t = await timelineProblems(dir, sessionId, listed);
    problems.push(...t.problems);
    running = t.running;
  }
  problems.push(...(await unlistedProblems(dir, listed)));
  // An export of a session still recording is sound but not final: steps after it are not in it.
  const status = problems.length > 0 ? null : running ? "running" : "complete";
  return { ok: problems.length === 0, evidenceId: sessionId, status, checked, problems };
}

/** The session statuses an export's timeline may carry (protobuf JSON names), and whether each is final. */
const SESSION_STATUS_FINAL: Readonly<Record<string, boolean>> = {
  SESSION_STATUS_RUNNING: false,
  SESSION_STATUS_PASSED: true,
  SESSION_STATUS_FAILED: true,
  SESSION_STATUS_LEASE_ENDED: true,
};

/** A PNG decodes in full (every row) at the size the manifest lists. */
async function pngProblem(file: string, entry: SessionExportFile): Promise<string | null> {
  if (!Number.isSafeInteger(entry.width) || !Number.isSafeInteger(entry.height)) return "a PNG listed without its width and height";
  try {
    const meta = await sharp(file, { limitInputPixels: PNG_MAX_PIXELS }).metadata();
    if (meta.format !== "png") return `listed as image/png, but it is ${meta.format ?? "no known format"}`;
    const { info } = await sharp(file, { limitInputPixels: PNG_MAX_PIXELS, failOn: "warning" }).raw().toBuffer({ resolveWithObject: true });
    if (info.width !== entry.width || info.height !== entry.height) return `decodes to ${info.width}x${info.height}, the manifest lists ${entry.width}x${entry.height}`;
    return null;
  } catch (err) {
    return `does not decode as a PNG: ${(err as Error).message}`;
  }
}

/**
 * timeline.json is the session's, its status is one a session has, and
 * every screenshot file it names is listed with the sha256 the step
 * records. `running`: the session was still recording when exported.
 */
async function timelineProblems(dir: string, sessionId: string | null, listed: ReadonlyMap<string, SessionExportFile>): Promise<{ problems: string[]; running: boolean }> {
  let timeline: unknown;
  try {
    timeline = JSON.parse(await readFile(join(dir, "timeline.json"), "utf8"));
  } catch (err) {
    // A missing file is reported with the listed files.
    return { problems: (err as NodeJS.ErrnoException).code === "ENOENT" ? [] : [`timeline.json: ${(err as Error).message}`], running: false };
  }
  if (!isObject(timeline)) return { problems: ["timeline.json: not a JSON object"], running: false };
  const problems: string[] = [];
  if (timeline["kind"] !== SESSION_TIMELINE_KIND) problems.push(`timeline.json: kind is ${JSON.stringify(timeline["kind"])}, not "${SESSION_TIMELINE_KIND}"`);
  if (sessionId !== null && timeline["sessionId"] !== sessionId) problems.push(`timeline.json: session ${JSON.stringify(timeline["sessionId"])}, the manifest's is ${sessionId}`);
  const session = timeline["session"];
  let running = false;
  if (!isObject(session)) problems.push("timeline.json: no session");
  else {
    // Unknown stays unknown: a status that is missing or not a session's is a problem, not "complete".
    const final = typeof session["status"] === "string" ? SESSION_STATUS_FINAL[session["status"]] : undefined;
    if (final === undefined) problems.push(`timeline.json: session status ${JSON.stringify(session["status"] ?? null)} is not one a session has`);
    running = final === false;
  }
  const steps = timeline["steps"];
  if (!Array.isArray(steps)) return { problems: [...problems, "timeline.json: steps is not a list"], running };
  for (const [i, step] of (steps as unknown[]).entries()) {
    if (!isObject(step)) {
      problems.push(`timeline.json: steps[${i}] is not an object`);
      continue;
    }
    const seq = typeof step["sequence"] === "number" ? `#${step["sequence"]}` : `steps[${i}]`;
    for (const side of ["before", "after"] as const) {
      const img = step[side];
      if (img === undefined) continue;
      if (!isObject(img)) {
        problems.push(`timeline.json: step ${seq} ${side} is not an object`);
        continue;
      }
      const file = img["file"];
      if (file === undefined) {
        // A screenshot the export holds must be named; a failed capture has none.
        if (typeof img["sha256"] === "string" && img["sha256"] !== "") problems.push(`timeline.json: step ${seq} ${side} shows screenshot ${img["sha256"]} but names no file`);
        if (typeof img["evidenceId"] === "string" && img["evidenceId"] !== "") problems.push(`timeline.json: step ${seq} ${side} shows still evidence ${img["evidenceId"]} but names no file`);
        continue;
      }
      if (typeof file !== "string" || !isExportPath(file) || file === "timeline.json") {
        problems.push(`timeline.json: step ${seq} ${side} names ${JSON.stringify(file)}, not an images/ file`);
        continue;
      }
      const entry = listed.get(file);
      if (!entry) {
        problems.push(`timeline.json: step ${seq} ${side} names ${file}, which the manifest does not list`);
        continue;
      }
      if (typeof img["sha256"] === "string" && img["sha256"] !== "" && img["sha256"] !== entry.sha256) {
        problems.push(`timeline.json: step ${seq} ${side} records screenshot ${img["sha256"]}, but ${file} is listed with sha256 ${entry.sha256}`);
      }
    }
  }
  return { problems, running };
}

/** Anything in the directory besides manifest.json that the manifest does not list. */
async function unlistedProblems(dir: string, listed: ReadonlyMap<string, SessionExportFile>): Promise<string[]> {
  const problems: string[] = [];
  let top: string[];
  try {
    top = await readdir(dir);
  } catch (err) {
    return [`${dir}: ${(err as Error).message}`];
  }
  for (const name of top.sort()) {
    if (name === "manifest.json" || listed.has(name)) continue;
    if (name === "images") {
      const s = await lstat(join(dir, name));
      if (!s.isDirectory()) {
        problems.push("images: not a directory");
        continue;
      }
      for (const inner of (await readdir(join(dir, name))).sort()) {
        if (!listed.has(`images/${inner}`)) problems.push(`images/${inner}: not listed in the manifest`);
      }
      continue;
    }
    problems.push(`${name}: not listed in the manifest`);
  }
  return problems;
}
