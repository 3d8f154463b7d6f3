import { mkdir, rm, rmdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { ConnectError } from "@connectrpc/connect";
import { Errors, farmError } from "@farm/shared/errors";
import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { fsyncDir, renameDurably, writeFileDurably } from "@farm/shared/durable-file";
import { VerifiedFileWriter } from "@farm/shared/verified-file";
import type { PullEvidenceResponse } from "@farm/shared/gen/farm/v1/evidence_service_pb";

const pathPattern = /^[A-Za-z0-9._-]+$/;

/** Local failures that mean "this disk could not hold the bundle", not a bad path. */
const SPACE_CODES = new Set(["ENOSPC", "EDQUOT", "EFBIG", "ESHORTWRITE"]);

/**
 * Claims a new bundle directory: mkdir without `recursive` is atomic, so of
 * two captures racing for one path exactly one wins; the other gets
 * EVIDENCE_OUTPUT_EXISTS and touches nothing.
 */
export async function claimBundleDir(dir: string): Promise<void> {
  try {
    await mkdir(dir, { mode: 0o700 });
    // Best effort: the new entry in the parent outlives a crash (a parent we may not open is no reason to fail).
    await fsyncDir(dirname(dir)).catch(() => undefined);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EEXIST") throw farmError(Errors.EVIDENCE_OUTPUT_EXISTS, `output dir ${dir} already exists; a new capture needs a new directory`, "output-dir");
    if (code !== undefined && SPACE_CODES.has(code)) throw farmError(Errors.EVIDENCE_CAPTURE_FAILED, `cannot create output dir ${dir}: ${(err as Error).message}`, "output-dir");
    throw farmError(Errors.INVALID_ARGUMENT, `cannot create output dir ${dir}: ${(err as Error).message}`, "output-dir");
  }
}

/** Where a file is written until it is complete and verified; never a name a bundle uses. */
const incoming = (dir: string, name: string) => join(dir, `.${name}.incoming-${process.pid}`);

/**
 * Publishes `data` as `dir/name`: written in full to a temporary name
 * (every write's length checked), fsync'd, renamed, then the directory
 * fsync'd. Readers never see an empty or torn file under `name`; on failure
 * the temporary file is removed.
 */
export async function publishBundleFile(dir: string, name: string, data: string | Uint8Array): Promise<void> {
  await writeFileDurably(join(dir, name), data);
}

export interface PullDestination {
  dir: string;
  /** Named in every failure: the bundle stays in the coordinator's store under it. */
  evidenceId: string;
  /**
   * True: `dir` is new, created (0700) only once the coordinator's first
   * answer shows the bundle exists, and removed again if the call fails
   * before any file landed in it. False: `dir` exists (a video bundle's).
   */
  claim: boolean;
}

/**
 * A local storage failure as an evidence failure: EVIDENCE_CAPTURE_FAILED,
 * naming the evidence id and how to get the bundle, which nothing here lost.
 */
function storageFailure(dest: PullDestination, what: string, err: unknown): ConnectError {
  const code = (err as NodeJS.ErrnoException).code;
  const full = code !== undefined && SPACE_CODES.has(code);
  return farmError(
    Errors.EVIDENCE_CAPTURE_FAILED,
    `evidence ${dest.evidenceId}: writing ${what} into ${dest.dir} failed${full ? " (the disk is full)" : ""}: ${(err as Error).message}; ` +
      `the bundle is kept in the coordinator's store: \`farm evidence pull ${dest.evidenceId} --output-dir NEW_DIR\` fetches it`,
    undefined,
    undefined,
    err,
  );
}

/** A local file-system error (it has an errno code and a syscall), not one from the stream. */
function isLocalFsError(err: unknown): boolean {
  if (err instanceof ConnectError) return false;
  const e = err as NodeJS.ErrnoException;
  return e instanceof Error && typeof e.code === "string" && (typeof e.syscall === "string" || e.code === "ESHORTWRITE");
}

/**
 * Writes a pulled bundle: nothing is created until the coordinator answers
 * (an unknown id creates nothing); every file is checked against its
 * announced size and sha256 as it arrives, written under a temporary name,
 * and published (renamed, directory fsync'd) only once complete; the
 * manifest is checked against the files and published last. If the stream
 * or the disk fails, the files already published stay, the one in flight is
 * removed and no manifest is written, so the directory never claims more
 * than it holds; a full disk is EVIDENCE_CAPTURE_FAILED naming the evidence.
 */
export async function writePulledBundle(dest: PullDestination, stream: AsyncIterable<PullEvidenceResponse>): Promise<EvidenceManifest> {
  const { dir, evidenceId } = dest;
  const transferFailed = (message: string) => farmError(Errors.EVIDENCE_TRANSFER_FAILED, `evidence ${evidenceId}: ${message}`);
  const received = new Map<string, { size: number; sha256: string }>();
  const it = stream[Symbol.asyncIterator]();
  let claimed = false;
  let finished = false;
  let current: { path: string; tmp: string; file: VerifiedFileWriter } | undefined;
  // Runs a local file-system step, turning its failure into an evidence failure.
  const disk = async <T>(what: string, op: () => Promise<T>): Promise<T> => {
    try {
      return await op();
    } catch (err) {
      throw isLocalFsError(err) ? storageFailure(dest, what, err) : err;
    }
  };
  const endFile = async () => {
    const c = current;
    if (!c) return;
    const got = await disk(c.path, () => c.file.finish());
    if (!got.ok) {
      throw transferFailed(`${c.path}: got ${got.size} bytes with sha256 ${got.sha256}, expected ${c.file.expected.size} bytes with ${c.file.expected.sha256}`);
    }
    await disk(c.path, async () => {
      await renameDurably(c.tmp, join(dir, c.path));
      current = undefined;
    });
    received.set(c.path, c.file.expected);
  };
  try {
    // The first answer proves the bundle exists (or fails, creating nothing).
    let next = await it.next();
    if (dest.claim) {
      await claimBundleDir(dir);
      claimed = true;
    }
    for (; !next.done; next = await it.next()) {
      const msg = next.value;
      switch (msg.kind.case) {
        case "file": {
          await endFile();
          const { path, size, sha256 } = msg.kind.value;
          if (!pathPattern.test(path) || path === "manifest.json" || received.has(path)) {
            throw transferFailed(`refusing file name "${path}" from the coordinator`);
          }
          const tmp = incoming(dir, path);
          current = { path, tmp, file: await disk(path, () => VerifiedFileWriter.create(tmp, { size: Number(size), sha256 })) };
          break;
        }
        case "chunk": {
          const c = current;
          if (!c) throw transferFailed("data arrived before a file header");
          const bytes = msg.kind.value;
          if (!(await disk(c.path, () => c.file.write(bytes)))) throw transferFailed(`${c.path} is larger than announced`);
          break;
        }
        case "manifestJson": {
          await endFile();
          // The coordinator checked the schema when the bundle was stored;
          // here every listed file must have arrived intact, and nothing else.
          const manifest = JSON.parse(msg.kind.value) as EvidenceManifest;
          if (manifest.schemaVersion !== 1 || !Array.isArray(manifest.artifacts)) throw transferFailed("the manifest is not schema version 1");
          for (const a of manifest.artifacts) {
            if (a.path === null) continue;
            const f = received.get(a.path);
            if (!f || f.size !== a.bytes || f.sha256 !== a.sha256) throw transferFailed(`artifact ${a.path} was not received intact`);
          }
          const text = msg.kind.value;
          await disk("manifest.json", () => publishBundleFile(dir, "manifest.json", text));
          finished = true;
          return manifest;
        }
        default:
          break;
      }
    }
    throw transferFailed("the transfer ended before the manifest; the directory holds only the files received so far");
  } finally {
    const c = current;
    if (c) {
      await c.file.abort();
      await rm(c.tmp, { force: true }).catch(() => undefined);
    }
    // Ours and still empty: take it back, so a retry can use the same path.
    if (claimed && !finished && received.size === 0) await rmdir(dir).catch(() => undefined);
    // Stops the stream if this ended early (a failure here, not at the coordinator).
    if (!finished) await it.return?.().catch(() => undefined);
  }
}
