import { createHash, randomUUID } from "node:crypto";
import { readdir, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { ConnectError } from "@connectrpc/connect";
import { fsyncDir, writeFileDurably } from "@farm/shared/durable-file";
import { Errors, farmError } from "@farm/shared/errors";
import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { manifestSchemaErrors } from "@farm/shared/evidence-manifest-validate";
import { ensurePrivateDir } from "@farm/shared/secure-file";
import { VerifiedFileWriter } from "@farm/shared/verified-file";
import { decodePageToken, pageSizeOf, readPage, type Page, type PageRequest } from "../paging.js";
import type { ByteRange, ByteStore } from "../bytes/byte-store.js";
import { FileByteStore } from "../bytes/file-byte-store.js";
import type { EvidenceFilter, EvidenceIndexStore, EvidenceRow, EvidenceTotal } from "./evidence-index-store.js";

export type { EvidenceRow } from "./evidence-index-store.js";

const idPattern = /^[0-9a-f-]{36}$/;
const pathPattern = /^[A-Za-z0-9._-]+$/;

/**
 * The coordinator's evidence store. An upload lands in .incoming/<id>; each
 * file is checked against the size and sha256 its sender announced, and the
 * manifest against the files it lists. Only then is the directory fsync'd,
 * renamed into place (both parents fsync'd) and indexed, so a listed bundle
 * is always whole. A disk that cannot hold an upload fails it with
 * EVIDENCE_CAPTURE_FAILED naming the evidence id; the agent keeps its
 * staged copy and sends it again.
 */
export class EvidenceStore {
  readonly root: string;
  /** Uploads in progress, so one bundle is never received twice at once. */
  readonly receiving = new Set<string>();
  /** Receives every newly published bundle; set by the coordinator for live watchers. */
  onPublish: ((row: EvidenceRow) => void) | undefined;

  /** Where bundles are received and checked before they are published: this process's own. */
  readonly staging: string;
  private readonly bytes: ByteStore;
  private readonly shared: boolean;

  /**
   * @param opts.bytes where published bundles live (default: files under the data dir)
   * @param opts.shared other replicas share the data dir: leave their uploads alone
   */
  constructor(
    private readonly index: EvidenceIndexStore,
    dataDir: string,
    opts: { bytes?: ByteStore; shared?: boolean } = {},
  ) {
    this.root = join(dataDir, "evidence");
    this.bytes = opts.bytes ?? new FileByteStore(dataDir);
    this.shared = opts.shared ?? false;
    this.staging = join(this.root, ".incoming", this.shared ? randomUUID() : "");
  }

  async init(): Promise<void> {
    await ensurePrivateDir(this.root);
    // Half-finished uploads from a previous run are never published; another replica's are not ours to remove.
    if (!this.shared) await rm(join(this.root, ".incoming"), { recursive: true, force: true });
    else await removeStale(join(this.root, ".incoming"));
    await ensurePrivateDir(join(this.root, ".incoming"));
    await ensurePrivateDir(this.staging);
  }

  async beginUpload(meta: { evidenceId: string; kind: string; serial: string; physicalId: string; agentId: string }): Promise<Upload> {
    if (!idPattern.test(meta.evidenceId)) throw farmError(Errors.INVALID_ARGUMENT, "bad evidence id", "evidence_id");
    const exists = () => farmError(Errors.ALREADY_EXISTS, `evidence ${meta.evidenceId} already exists`, "evidence_id");
    if (this.receiving.has(meta.evidenceId)) throw exists();
    // Claimed before the index is read, so two streams for one id never both pass the check.
    this.receiving.add(meta.evidenceId);
    let indexed: EvidenceRow | undefined;
    try {
      indexed = await this.get(meta.evidenceId);
    } catch (err) {
      this.receiving.delete(meta.evidenceId);
      throw err;
    }
    if (indexed) {
      this.receiving.delete(meta.evidenceId);
      throw exists();
    }
    return new Upload(this, meta);
  }

  get(evidenceId: string): Promise<EvidenceRow | undefined> {
    return this.index.get(evidenceId);
  }

  /** Whether a bundle is published. */
  async has(evidenceId: string): Promise<boolean> {
    return (await this.index.get(evidenceId)) !== undefined;
  }

  /** Of these ids, those of published bundles: one read for a whole listing. */
  publishedAmong(evidenceIds: readonly string[]): Promise<Set<string>> {
    return this.index.indexedAmong(evidenceIds);
  }

  async require(evidenceId: string): Promise<EvidenceRow> {
    const row = idPattern.test(evidenceId) ? await this.get(evidenceId) : undefined;
    if (!row) throw farmError(Errors.EVIDENCE_NOT_FOUND, `no evidence ${evidenceId} in the store`, "evidence_id");
    return row;
  }

  /** Stored bundles and their bytes per kind and status. */
  totals(): Promise<EvidenceTotal[]> {
    return this.index.totals();
  }

  /** One page, newest first; the key is (created_at, evidence_id), unique even when bundles share a millisecond. */
  async listPage(filter: EvidenceFilter, page: PageRequest): Promise<Page<EvidenceRow>> {
    const scope = { list: "evidence", filter: { serial: filter.serial, status: filter.status, label: filter.label } };
    const shape = ["number", "string"] as const;
    // A bad token or size is refused before the index is read; readPage then cuts the page from the rows read.
    const size = pageSizeOf(page.pageSize);
    const after = decodePageToken(page.pageToken, scope, shape);
    const rows = await this.index.listAfter(filter, after, size + 1);
    return readPage(page, scope, shape, (row: EvidenceRow) => [row.createdAt, row.evidenceId] as const, () => rows);
  }

  /** A published bundle's file: its size, or undefined when it has no such file. */
  sizeOf(evidenceId: string, path: string): Promise<number | undefined> {
    return this.bytes.sizeOf(keyOf(evidenceId, path));
  }

  /** A published bundle's file (or a range of it), in chunks. */
  read(evidenceId: string, path: string, range?: ByteRange): AsyncGenerator<Uint8Array> {
    return this.bytes.read(keyOf(evidenceId, path), range);
  }

  async manifest(evidenceId: string): Promise<{ text: string; manifest: EvidenceManifest }> {
    const parts: Buffer[] = [];
    for await (const chunk of this.read(evidenceId, "manifest.json")) parts.push(Buffer.from(chunk));
    const text = Buffer.concat(parts).toString("utf8");
    return { text, manifest: JSON.parse(text) as EvidenceManifest };
  }

  /** @internal used by Upload */
  async publish(upload: Upload, manifestText: string, files: Map<string, { size: number; sha256: string }>, totalBytes: number): Promise<EvidenceRow> {
    let manifest: EvidenceManifest;
    try {
      manifest = JSON.parse(manifestText) as EvidenceManifest;
    } catch {
      throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, "the manifest is not JSON", "manifest_json");
    }
    const problems = manifestSchemaErrors(manifest);
    if (problems.length > 0) throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, `the manifest does not match schema version 1: ${problems.slice(0, 5).join("; ")}`, "manifest_json");
    if (manifest.evidenceId !== upload.meta.evidenceId) throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, "the manifest names another evidence id", "manifest_json");
    for (const a of manifest.artifacts) {
      if (a.path === null) continue;
      const f = files.get(a.path);
      if (!f || f.size !== a.bytes || f.sha256 !== a.sha256) {
        throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, `artifact ${a.path} does not match what was uploaded`, "manifest_json");
      }
    }
    const id = upload.meta.evidenceId;
    try {
      await storing(id, "manifest.json", async () => {
        await writeFileDurably(join(upload.dir, "manifest.json"), manifestText);
        // Every file's entry is durable before the bundle's name is.
        await fsyncDir(upload.dir);
        const all = new Map(files).set("manifest.json", { size: Buffer.byteLength(manifestText), sha256: createHash("sha256").update(manifestText).digest("hex") });
        // Unindexed, so never published: what a publish cut short (a crash before the index) is replaced.
        await this.bytes.adoptDir(`evidence/${id}`, upload.dir, all);
      });
    } catch (err) {
      await this.bytes.removeUnder(`evidence/${id}`).catch(() => undefined);
      throw err;
    }
    const row: EvidenceRow = {
      evidenceId: upload.meta.evidenceId,
      kind: manifest.kind,
      status: manifest.status,
      label: manifest.label,
      serial: upload.meta.serial,
      physicalId: upload.meta.physicalId,
      agentId: upload.meta.agentId,
      createdAt: Date.now(),
      totalBytes,
      manifestSha256: createHash("sha256").update(manifestText).digest("hex"),
    };
    try {
      await this.index.insert(row);
    } catch (err) {
      // Not indexed, so not published: the agent still has its copy and sends it again.
      await this.bytes.removeUnder(`evidence/${id}`).catch(() => undefined);
      throw farmError(Errors.EVIDENCE_CAPTURE_FAILED, `evidence ${id}: the coordinator could not index the bundle: ${(err as Error).message}`);
    }
    this.receiving.delete(upload.meta.evidenceId);
    this.onPublish?.(row);
    return row;
  }
}

/** One bundle being received. Files arrive one after another. */
export class Upload {
  readonly dir: string;
  private readonly files = new Map<string, { size: number; sha256: string }>();
  private current: VerifiedFileWriter | undefined;
  private totalBytes = 0;
  private started = false;

  constructor(
    private readonly store: EvidenceStore,
    readonly meta: { evidenceId: string; kind: string; serial: string; physicalId: string; agentId: string },
  ) {
    this.dir = join(store.staging, meta.evidenceId);
  }

  async startFile(path: string, size: number, sha256: string): Promise<void> {
    if (!this.started) {
      await storing(this.meta.evidenceId, ".incoming", () => ensurePrivateDir(this.dir));
      this.started = true;
    }
    await this.endFile();
    if (!pathPattern.test(path) || path === "manifest.json" || this.files.has(path)) {
      throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, `bad or repeated file name "${path}"`, "path");
    }
    this.current = await storing(this.meta.evidenceId, path, () => VerifiedFileWriter.create(join(this.dir, path), { size, sha256 }));
    this.currentPath = path;
  }

  private currentPath = "";

  async chunk(bytes: Uint8Array): Promise<void> {
    const c = this.current;
    if (!c) throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, "a chunk arrived before any file header", "chunk");
    if (!(await storing(this.meta.evidenceId, this.currentPath, () => c.write(bytes)))) throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, `${this.currentPath} is larger than announced`, "chunk");
  }

  private async endFile(): Promise<void> {
    const c = this.current;
    if (!c) return;
    this.current = undefined;
    const got = await storing(this.meta.evidenceId, this.currentPath, () => c.finish());
    if (!got.ok) {
      throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, `${this.currentPath}: received ${got.size} bytes with sha256 ${got.sha256}, announced ${c.expected.size} bytes with ${c.expected.sha256}`, "chunk");
    }
    this.files.set(this.currentPath, c.expected);
    this.totalBytes += c.expected.size;
  }

  async finish(manifestText: string): Promise<EvidenceRow> {
    if (!this.started) {
      await storing(this.meta.evidenceId, ".incoming", () => ensurePrivateDir(this.dir));
      this.started = true;
    }
    await this.endFile();
    return this.store.publish(this, manifestText, this.files, this.totalBytes);
  }

  async abort(): Promise<void> {
    const c = this.current;
    this.current = undefined;
    await c?.abort();
    await rm(this.dir, { recursive: true, force: true });
    this.store.receiving.delete(this.meta.evidenceId);
  }
}

/**
 * Runs one step of storing a bundle; a file-system failure (a full disk, a
 * short write, an I/O error) becomes EVIDENCE_CAPTURE_FAILED naming the
 * evidence id and the file, never INTERNAL.
 */
async function storing<T>(evidenceId: string, path: string, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (err instanceof ConnectError) throw err;
    const code = (err as NodeJS.ErrnoException | null)?.code;
    if (typeof code !== "string") throw err;
    throw farmError(
      Errors.EVIDENCE_CAPTURE_FAILED,
      `evidence ${evidenceId}: the coordinator's evidence store could not write ${path}: ${(err as Error).message}`,
      undefined,
      undefined,
      err,
    );
  }
}

function keyOf(evidenceId: string, path: string): string {
  if (!idPattern.test(evidenceId)) throw farmError(Errors.EVIDENCE_NOT_FOUND, `no evidence ${evidenceId} in the store`, "evidence_id");
  if (!pathPattern.test(path)) throw farmError(Errors.NOT_FOUND, `no file ${path} in evidence ${evidenceId}`, "path");
  return `evidence/${evidenceId}/${path}`;
}

/** A day without a write: the replica that was receiving into it is long gone. */
const STALE_STAGING_MS = 24 * 60 * 60_000;

/** Removes other processes' staging directories that nobody has written to for a day. */
async function removeStale(incoming: string): Promise<void> {
  for (const name of await readdir(incoming).catch(() => [] as string[])) {
    const s = await stat(join(incoming, name)).catch(() => undefined);
    if (s && Date.now() - s.mtimeMs > STALE_STAGING_MS) await rm(join(incoming, name), { recursive: true, force: true });
  }
}
