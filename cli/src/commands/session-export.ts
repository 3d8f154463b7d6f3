import { createHash } from "node:crypto";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { toJson, type JsonObject } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { isStorageError, renameDurably, writeFileDurably } from "@farm/shared/durable-file";
import { Errors, farmError } from "@farm/shared/errors";
import { validateOutputDir } from "@farm/shared/evidence-options";
import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { ensurePrivateDir } from "@farm/shared/secure-file";
import { VerifiedFileWriter } from "@farm/shared/verified-file";
import { SessionSchema, type SessionStep, type StepImage } from "@farm/shared/gen/farm/v1/session_service_pb";
import sharp from "sharp";
import { claimBundleDir } from "@farm/client/bundle-writer";
import { TransferMeter, withProgress, type Progress } from "../progress/progress.js";
import { clientSession, type ClientSession } from "../session.js";
import { SESSION_EXPORT_KIND, SESSION_TIMELINE_KIND, legacyImageName, type SessionExportFile, type SessionExportManifest } from "../session-export-verify.js";
import type { sessionExportOptions } from "../tree/session-commands.js";
import type { Action } from "../tree/spec.js";
import { outputDirOf } from "./evidence.js";
import { listAllSteps, statusWord, stepJson } from "./session.js";
import { asCli } from "./device-target.js";
import { asCliStream, libraryClient } from "./library-client.js";

/** Time for a transfer on top of the usual deadline. */
const TRANSFER_ALLOWANCE_MS = 60_000;
const PNG_MAX_PIXELS = 32_000_000;
const shaPattern = /^[0-9a-f]{64}$/;

/** What one export needs to reach while it writes. */
interface Export {
  dir: string;
  sessionId: string;
  session: ClientSession;
  signal: AbortSignal;
  meter: TransferMeter;
  /** Every file written so far (manifest.json is written last, from this). */
  files: SessionExportFile[];
}

const transferFailed = (ex: Export, message: string) => farmError(Errors.EVIDENCE_TRANSFER_FAILED, `session ${ex.sessionId}: ${message}`);

/** A local file-system failure as the export's failure; a full disk says so. */
async function disk<T>(ex: Export, what: string, op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    if (err instanceof ConnectError) throw err;
    const full = isStorageError(err);
    throw farmError(Errors.EVIDENCE_CAPTURE_FAILED, `session ${ex.sessionId}: writing ${what} into ${ex.dir} failed${full ? " (the disk is full)" : ""}: ${(err as Error).message}`, undefined, undefined, err);
  }
}

/**
 * One file arriving in chunks as `images/NAME`: created new (0600) under a
 * temporary name, refused past the announced size, checked against size
 * and sha256 at the end, and only then renamed into place.
 */
class IncomingImage {
  private finished = false;

  private constructor(
    private readonly ex: Export,
    readonly rel: string,
    private readonly tmp: string,
    private readonly file: VerifiedFileWriter,
  ) {}

  static async create(ex: Export, name: string, expected: { size: number; sha256: string }): Promise<IncomingImage> {
    const rel = `images/${name}`;
    const tmp = join(ex.dir, "images", `.${name}.incoming-${process.pid}`);
    return new IncomingImage(ex, rel, tmp, await disk(ex, rel, () => VerifiedFileWriter.create(tmp, expected)));
  }

  async write(chunk: Uint8Array): Promise<void> {
    if (!(await disk(this.ex, this.rel, () => this.file.write(chunk)))) throw transferFailed(this.ex, `${this.rel} is larger than the ${this.file.expected.size} bytes announced`);
    this.ex.meter.add(chunk.length);
  }

  async finish(): Promise<void> {
    const got = await disk(this.ex, this.rel, () => this.file.finish());
    this.finished = true;
    const want = this.file.expected;
    if (!got.ok) throw transferFailed(this.ex, `${this.rel}: got ${got.size} bytes with sha256 ${got.sha256}, expected ${want.size} bytes with ${want.sha256}`);
    await disk(this.ex, this.rel, () => renameDurably(this.tmp, join(this.ex.dir, this.rel)));
  }

  /** After a failure: nothing is left under the temporary name. */
  async discard(): Promise<void> {
    if (!this.finished) await this.file.abort();
    await rm(this.tmp, { force: true }).catch(() => undefined);
  }
}

/** File name extensions of a step's other files (artifacts) by media type. */
const ARTIFACT_EXTENSIONS: Readonly<Record<string, string>> = { "image/png": "png", "application/json": "json", "text/plain": "txt", "video/mp4": "mp4" };

/** A stored screenshot (ReadSessionImage) as images/SHA256.png; another stored file (a log, a tree) as images/SHA256.EXT. */
async function fetchSessionImage(ex: Export, image: Pick<StepImage, "sha256" | "size" | "width" | "height">, mimeType = "image/png"): Promise<string> {
  const { sha256 } = image;
  if (!shaPattern.test(sha256)) throw transferFailed(ex, `a step names screenshot "${sha256}", which is not a sha256`);
  const name = `${sha256}.${ARTIFACT_EXTENSIONS[mimeType] ?? "bin"}`;
  const stream = asCliStream(libraryClient(ex.session).sessionImage(ex.sessionId, sha256, { timeoutMs: Math.max(ex.session.timeoutMs, TRANSFER_ALLOWANCE_MS) }));
  let incoming: IncomingImage | undefined;
  let size = 0;
  try {
    for await (const msg of stream) {
      if (!incoming) {
        // The first message announces the size; the step's record must agree.
        size = Number(msg.size);
        if (image.size !== 0n && BigInt(size) !== image.size) throw transferFailed(ex, `screenshot ${sha256} is ${size} bytes in the store, the step records ${image.size}`);
        incoming = await IncomingImage.create(ex, name, { size, sha256 });
      }
      if (msg.chunk.length > 0) await incoming.write(msg.chunk);
    }
    if (!incoming) throw transferFailed(ex, `the coordinator sent nothing for screenshot ${sha256}`);
    await incoming.finish();
  } finally {
    await incoming?.discard();
  }
  // The store took it as a PNG of the size the step records; a record without the size is measured.
  const facts = mimeType !== "image/png" ? { mimeType } : image.width > 0 && image.height > 0 ? { mimeType: "image/png", width: image.width, height: image.height } : await pngFacts(join(ex.dir, "images", name));
  ex.files.push({ path: `images/${name}`, bytes: size, sha256, ...facts });
  return `images/${name}`;
}

/**
 * A still bundle's screenshot (a version 1 step) as images/evidence-ID-FILE:
 * the bundle is pulled (PullEvidence streams all of it) and only that file
 * kept, checked against its header and then against the bundle's manifest.
 */
async function fetchLegacyImage(ex: Export, image: StepImage): Promise<string> {
  const { evidenceId, path } = image;
  const name = legacyImageName(evidenceId, path);
  if (name === null) throw transferFailed(ex, `a step names still file "${evidenceId}/${path}", which is not a plain bundle file name`);
  const stream = asCliStream(libraryClient(ex.session).evidenceStream(evidenceId, { timeoutMs: Math.max(ex.session.timeoutMs, TRANSFER_ALLOWANCE_MS) }));
  let incoming: IncomingImage | undefined;
  let receiving = false;
  let expected: { size: number; sha256: string } | undefined;
  let manifest: EvidenceManifest | undefined;
  try {
    for await (const msg of stream) {
      if (msg.kind.case === "file" || msg.kind.case === "manifestJson") {
        // A header or the manifest ends the file before it.
        if (receiving) await incoming?.finish();
        receiving = false;
      }
      if (msg.kind.case === "file" && msg.kind.value.path === path && !expected) {
        expected = { size: Number(msg.kind.value.size), sha256: msg.kind.value.sha256 };
        incoming = await IncomingImage.create(ex, name, expected);
        receiving = true;
      } else if (msg.kind.case === "chunk" && receiving) {
        await incoming?.write(msg.kind.value);
      } else if (msg.kind.case === "manifestJson") {
        manifest = JSON.parse(msg.kind.value) as EvidenceManifest;
        break;
      }
    }
    if (!expected) throw farmError(Errors.EVIDENCE_NOT_FOUND, `session ${ex.sessionId}: still evidence ${evidenceId} has no file ${path}`);
    if (!manifest) throw transferFailed(ex, `still evidence ${evidenceId}: the transfer ended before the bundle's manifest`);
    const listed = Array.isArray(manifest.artifacts) ? manifest.artifacts.find((a) => a.path === path) : undefined;
    if (!listed || listed.bytes !== expected.size || listed.sha256 !== expected.sha256) throw transferFailed(ex, `still evidence ${evidenceId}: ${path} is not the file its manifest lists`);
  } finally {
    await incoming?.discard();
  }
  ex.files.push({ path: `images/${name}`, bytes: expected.size, sha256: expected.sha256, ...(await pngFacts(join(ex.dir, "images", name))) });
  return `images/${name}`;
}

/** A file that decodes in full as a PNG is listed as one, with its size; anything else as plain bytes. */
async function pngFacts(file: string): Promise<Pick<SessionExportFile, "mimeType" | "width" | "height">> {
  try {
    const meta = await sharp(file, { limitInputPixels: PNG_MAX_PIXELS }).metadata();
    if (meta.format !== "png") return { mimeType: "application/octet-stream" };
    const { info } = await sharp(file, { limitInputPixels: PNG_MAX_PIXELS, failOn: "warning" }).raw().toBuffer({ resolveWithObject: true });
    return { mimeType: "image/png", width: info.width, height: info.height };
  } catch {
    return { mimeType: "application/octet-stream" };
  }
}

/**
 * The relative file of a step's screenshot, fetched once per distinct
 * screenshot; null for a capture that failed (or none recorded).
 */
async function fileFor(ex: Export, image: StepImage | undefined, fetched: Map<string, string>): Promise<string | null> {
  if (!image) return null;
  const key = image.sha256 ? `sha:${image.sha256}` : image.evidenceId ? `ev:${image.evidenceId}/${image.path}` : null;
  if (key === null) return null;
  const known = fetched.get(key);
  if (known !== undefined) return known;
  const file = image.sha256 ? await fetchSessionImage(ex, image) : await fetchLegacyImage(ex, image);
  fetched.set(key, file);
  return file;
}

/** A step in protobuf JSON, each screenshot and other file it keeps with its `file` in the export. */
function timelineStep(step: SessionStep, files: { before: string | null; after: string | null; artifacts: (string | null)[] }): JsonObject {
  const json = stepJson(step);
  for (const side of ["before", "after"] as const) {
    const file = files[side];
    const img = json[side];
    if (file !== null && img && typeof img === "object" && !Array.isArray(img)) json[side] = { ...img, file };
  }
  if (Array.isArray(json["artifacts"])) json["artifacts"] = json["artifacts"].map((a, i) => (files.artifacts[i] && a && typeof a === "object" && !Array.isArray(a) ? { ...a, file: files.artifacts[i] } : a));
  return json;
}

/** The files a step keeps beyond its screenshots (device log, UI trees, a diagnosis), each fetched once. */
async function artifactFiles(ex: Export, step: SessionStep, fetched: Map<string, string>): Promise<(string | null)[]> {
  const out: (string | null)[] = [];
  for (const a of step.artifacts) {
    if (!a.sha256) {
      out.push(null);
      continue;
    }
    const key = `sha:${a.sha256}`;
    let file = fetched.get(key);
    if (file === undefined) {
      file = await fetchSessionImage(ex, { sha256: a.sha256, size: a.size, width: 0, height: 0 }, a.mimeType || "application/octet-stream");
      fetched.set(key, file);
    }
    out.push(file);
  }
  return out;
}

/** The file entry of bytes written by this export. */
async function writeListed(ex: Export, path: string, text: string, mimeType: string): Promise<void> {
  const bytes = Buffer.from(text, "utf8");
  await disk(ex, path, () => writeFileDurably(join(ex.dir, path), bytes));
  ex.files.push({ path, bytes: bytes.length, sha256: createHash("sha256").update(bytes).digest("hex"), mimeType });
}

/**
 * `farm session export ID DIR` (or `--output-dir DIR`): the session's
 * timeline and every screenshot it shows, as a directory `farm evidence
 * verify` checks offline.
 */
export const exportSession: Action<typeof sessionExportOptions> = async (input) => {
  const { opts, ctx } = input;
  const [sessionId] = input.args as [string];
  const dir = validateOutputDir(outputDirOf(input.args[1], opts.outputDir));
  const session = clientSession(input);
  const signal = ctx.stopSignal;
  // Nothing is created until the session is found and its timeline read.
  const got = await asCli(libraryClient(session).session(sessionId));
  if (!got) throw farmError(Errors.INTERNAL, `the coordinator answered no session for ${sessionId}`);
  const s = got;
  const steps = await listAllSteps(session, sessionId);

  await claimBundleDir(dir);
  let finished = false;
  try {
    const result = await withProgress(ctx, `exporting ${sessionId}`, async (p: Progress) => {
      const ex: Export = { dir, sessionId, session, signal, meter: new TransferMeter(`exporting ${sessionId}`, p), files: [] };
      await disk(ex, "images/", () => ensurePrivateDir(join(dir, "images")));
      const fetched = new Map<string, string>();
      const timelineSteps: JsonObject[] = [];
      let failedCaptures = 0;
      for (const step of steps) {
        const before = await fileFor(ex, step.before, fetched);
        const after = await fileFor(ex, step.after, fetched);
        failedCaptures += [step.before, step.after].filter((i) => i && !i.sha256 && !i.evidenceId && i.errorCode).length;
        timelineSteps.push(timelineStep(step, { before, after, artifacts: await artifactFiles(ex, step, fetched) }));
      }
      const exportedAt = new Date().toISOString();
      const timeline = {
        kind: SESSION_TIMELINE_KIND,
        schemaVersion: 1,
        sessionId,
        exportedAt,
        session: toJson(SessionSchema, s) as JsonObject,
        steps: timelineSteps,
      };
      await writeListed(ex, "timeline.json", JSON.stringify(timeline, null, 2) + "\n", "application/json");
      const manifest: SessionExportManifest = { kind: SESSION_EXPORT_KIND, schemaVersion: 1, sessionId, exportedAt, files: ex.files };
      // Last: a directory with a manifest holds everything it lists.
      await disk(ex, "manifest.json", () => writeFileDurably(join(dir, "manifest.json"), JSON.stringify(manifest, null, 2) + "\n"));
      return { images: fetched.size, failedCaptures, bytes: ex.files.reduce((n, f) => n + f.bytes, 0) };
    });
    finished = true;
    const data = {
      sessionId,
      status: statusWord(s.status),
      outputDir: dir,
      manifestPath: join(dir, "manifest.json"),
      steps: steps.length,
      images: result.images,
      failedCaptures: result.failedCaptures,
      bytes: result.bytes,
    };
    ctx.printer.result(data, () =>
      [
        `session ${sessionId} (${data.status}) exported to ${dir}: ${steps.length} step(s), ${result.images} screenshot(s)` +
        (result.failedCaptures > 0 ? `, ${result.failedCaptures} capture(s) that had failed` : ""),
        `check it with \`farm evidence verify ${dir}\``,
      ].join("\n"));
    return 0;
  } finally {
    // Ours: an export that failed leaves nothing behind, so a retry can use the path.
    if (!finished) await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }
};
