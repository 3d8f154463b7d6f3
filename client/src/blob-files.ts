import { randomBytes, createHash } from "node:crypto";
import { constants } from "node:fs";
import { access, rename, stat } from "node:fs/promises";
import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { fileAsBlobParts, writeBlobParts } from "@farm/shared/blob-parts";
import { Errors } from "@farm/shared/error-codes";
import { BlobPartSchema, type BlobPart } from "@farm/shared/gen/farm/v1/blob_pb";
import type { BlobService } from "@farm/shared/gen/farm/v1/blob_service_pb";
import type { CallOptions } from "@connectrpc/connect";
import { FarmError } from "./farm-error.js";

/** What a transfer reports as it goes (the CLI's progress line): the total once known, then each chunk. */
export interface TransferProgress {
  setTotal(bytes: number): void;
  add(bytes: number): void;
}

/** Bytes per chunk of an in-memory upload (as a file's, shared/src/verified-file.ts). */
const CHUNK_BYTES = 64 * 1024;

/** Feeds a meter from blob parts as they pass: the header's size, then each chunk. */
async function* metered(parts: AsyncIterable<BlobPart | undefined>, meter: TransferProgress | undefined): AsyncGenerator<BlobPart | undefined> {
  for await (const part of parts) {
    if (meter && part?.kind.case === "header") meter.setTotal(Number(part.kind.value.size));
    else if (meter && part?.kind.case === "chunk") meter.add(part.kind.value.length);
    yield part;
  }
}

/** Bytes in memory as blob parts: the header (size, sha256, name), then chunks. */
async function* bytesAsBlobParts(bytes: Uint8Array, name: string): AsyncGenerator<BlobPart> {
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  yield create(BlobPartSchema, { kind: { case: "header", value: { size: BigInt(bytes.length), sha256, name } } });
  for (let at = 0; at < bytes.length; at += CHUNK_BYTES) yield create(BlobPartSchema, { kind: { case: "chunk", value: bytes.subarray(at, at + CHUNK_BYTES) } });
}

export interface UploadOptions {
  meter?: TransferProgress | undefined;
  /** The name in the blob's header for bytes in memory (a file's is its base name). */
  name?: string | undefined;
  /** Refused (FILE_TOO_LARGE, field "file") before a byte of the file is read. */
  maxBytes?: number | undefined;
  call?: CallOptions | undefined;
}

function tooLarge(size: number, maxBytes: number): FarmError {
  return new FarmError(Errors.FILE_TOO_LARGE, `the file is ${size} bytes; at most ${maxBytes} are sent`, "file", null);
}

/** Streams a local file, or bytes in memory, to the coordinator's blob store; returns its id. */
export async function uploadFile(client: Client<typeof BlobService>, file: string | Uint8Array, opts: UploadOptions | TransferProgress = {}): Promise<string> {
  const o: UploadOptions = "add" in opts ? { meter: opts } : opts;
  let parts: AsyncIterable<BlobPart>;
  if (typeof file === "string") {
    try {
      await access(file, constants.R_OK);
    } catch (err) {
      throw new FarmError(Errors.INVALID_ARGUMENT, `cannot read ${file}: ${(err as Error).message}`, "file");
    }
    if (o.maxBytes !== undefined) {
      const { size } = await stat(file);
      if (size > o.maxBytes) throw tooLarge(size, o.maxBytes);
    }
    parts = fileAsBlobParts(file);
  } else {
    if (o.maxBytes !== undefined && file.length > o.maxBytes) throw tooLarge(file.length, o.maxBytes);
    parts = bytesAsBlobParts(file, o.name ?? "bytes");
  }
  const res = await client.uploadBlob(
    (async function* () {
      for await (const part of metered(parts, o.meter)) if (part) yield { part };
    })(),
    o.call,
  );
  return res.blobId;
}

/** A blob's parts, refused (RESOURCE_EXHAUSTED, field "size") if its header announces more than maxBytes. */
export async function* blobParts(client: Client<typeof BlobService>, blobId: string, call?: CallOptions, maxBytes?: number): AsyncGenerator<BlobPart | undefined> {
  for await (const res of client.downloadBlob({ blobId }, call)) {
    if (maxBytes !== undefined && res.part?.kind.case === "header" && Number(res.part.kind.value.size) > maxBytes) {
      throw new FarmError(Errors.RESOURCE_EXHAUSTED, `the blob is ${res.part.kind.value.size} bytes; at most ${maxBytes} are written`, "size", null);
    }
    yield res.part;
  }
}

export interface DownloadOptions {
  meter?: TransferProgress | undefined;
  maxBytes?: number | undefined;
  call?: CallOptions | undefined;
}

/** Downloads a blob into `file` (0600) atomically, checking size and sha256. */
export async function downloadFile(client: Client<typeof BlobService>, blobId: string, file: string, opts: DownloadOptions | TransferProgress = {}): Promise<{ size: number; sha256: string }> {
  const o: DownloadOptions = "add" in opts ? { meter: opts } : opts;
  // Unique per call, not per process: runs of the CLI in one process (tests) may download to one file at once.
  const tmp = `${file}.part-${process.pid}-${randomBytes(4).toString("hex")}`;
  const got = await writeBlobParts(metered(blobParts(client, blobId, o.call, o.maxBytes), o.meter), tmp);
  await rename(tmp, file);
  return got;
}
