import { open, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { Errors, farmError } from "@farm/shared/errors";
import { ensurePrivateDir } from "@farm/shared/secure-file";
import type { ByteRange, ByteStore } from "../bytes/byte-store.js";
import { FileByteStore } from "../bytes/file-byte-store.js";

const shaPattern = /^[0-9a-f]{64}$/;
/** File name extensions by media type; anything else is .bin. */
const extensions: Readonly<Record<string, string>> = { "image/png": "png", "application/json": "json", "text/plain": "txt", "video/mp4": "mp4" };
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/**
 * Session files (screenshots, logs, diagnoses), content-addressed: a screen
 * that did not change between steps (or sessions) is one file. Kept in the
 * byte store under `session-images/<two hex digits>/<sha256>.<ext>` (as
 * files: 0600 in 0700 directories, the fan-out so no directory grows
 * without bound; or in the database, for replicas).
 */
export class SessionImageStore {
  readonly root: string;
  private readonly bytes: ByteStore;

  constructor(dataDir: string, bytes?: ByteStore) {
    this.root = join(dataDir, "session-images");
    this.bytes = bytes ?? new FileByteStore(dataDir);
  }

  async init(): Promise<void> {
    await ensurePrivateDir(this.root);
  }

  key(sha256: string, mimeType = "image/png"): string {
    if (!shaPattern.test(sha256)) throw farmError(Errors.INVALID_ARGUMENT, "sha256 must be 64 lowercase hex digits", "sha256");
    return `session-images/${sha256.slice(0, 2)}/${sha256}.${extensions[mimeType] ?? "bin"}`;
  }

  async has(sha256: string, mimeType = "image/png"): Promise<boolean> {
    return (await this.sizeOf(sha256, mimeType)) !== undefined;
  }

  /** The stored file's size, or undefined when it is not in the store. */
  sizeOf(sha256: string, mimeType = "image/png"): Promise<number | undefined> {
    return this.bytes.sizeOf(this.key(sha256, mimeType));
  }

  /**
   * Takes a file whose bytes were already checked against `sha256` (the
   * blob store does that on arrival) into the store, or drops it when that
   * content is already here. The file must be a PNG of the claimed size:
   * what an agent calls a screenshot is checked, not trusted.
   */
  async adopt(file: string, sha256: string, claimed: { width: number; height: number }): Promise<void> {
    try {
      const dims = await pngSize(file);
      if (!dims) throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, "a step screenshot from the agent is not a PNG");
      if (dims.width !== claimed.width || dims.height !== claimed.height) {
        throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, `a step screenshot is ${dims.width}x${dims.height}, the agent said ${claimed.width}x${claimed.height}`);
      }
      await this.place(file, sha256, "image/png");
    } finally {
      await rm(file, { force: true });
    }
  }

  /** Takes any checked file (its bytes are `sha256`) into the store under its media type. */
  async adoptFile(file: string, sha256: string, mimeType: string): Promise<void> {
    try {
      await this.place(file, sha256, mimeType);
    } finally {
      await rm(file, { force: true });
    }
  }

  private async place(file: string, sha256: string, mimeType: string): Promise<void> {
    const key = this.key(sha256, mimeType);
    await this.bytes.adopt(key, file, { size: (await stat(file)).size, sha256 });
  }

  /** The stored bytes (or a range of them), in chunks; NOT_FOUND when the file is gone. */
  async *read(sha256: string, mimeType = "image/png", range?: ByteRange): AsyncGenerator<Uint8Array> {
    if (!(await this.has(sha256, mimeType))) throw farmError(Errors.NOT_FOUND, `file ${sha256} is not in the store`, "sha256");
    yield* this.bytes.read(this.key(sha256, mimeType), range);
  }

  /** A stored PNG's bytes, whole (screenshots are small): what OCR reads. */
  async bytesOf(sha256: string): Promise<Buffer> {
    const parts: Buffer[] = [];
    for await (const chunk of this.read(sha256)) parts.push(Buffer.from(chunk));
    return Buffer.concat(parts);
  }
}

/** Width and height from a PNG's IHDR, or undefined when the file is not a PNG. */
export async function pngSize(file: string): Promise<{ width: number; height: number } | undefined> {
  const fh = await open(file, "r");
  try {
    const head = Buffer.alloc(24);
    const { bytesRead } = await fh.read(head, 0, 24, 0);
    if (bytesRead < 24 || !head.subarray(0, 8).equals(PNG_SIGNATURE) || head.toString("latin1", 12, 16) !== "IHDR") return undefined;
    return { width: head.readUInt32BE(16), height: head.readUInt32BE(20) };
  } finally {
    await fh.close();
  }
}
