import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { Errors, farmError } from "@farm/shared/errors";
import { BlobPartSchema } from "@farm/shared/gen/farm/v1/blob_pb";
import type { BlobService } from "@farm/shared/gen/farm/v1/blob_service_pb";
import { sha256Hex } from "./compare.js";

/**
 * In-memory counterparts of blob-client.ts's file helpers, for the small
 * files of a check (a screenshot, a diff image, a diagnosis JSON): the same
 * parts (header with size and sha256, then chunks of at most 1 MiB).
 */

const CHUNK = 1024 * 1024;
/** A screenshot is a few MiB; more than this is not one. */
const MAX_DOWNLOAD = 64 * 1024 * 1024;

/** Uploads bytes as a blob; returns its id. */
export async function uploadBytes(client: Client<typeof BlobService>, bytes: Uint8Array, name: string, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<string> {
  const res = await client.uploadBlob(
    (async function* () {
      yield { part: create(BlobPartSchema, { kind: { case: "header", value: { size: BigInt(bytes.length), sha256: sha256Hex(bytes), name } } }) };
      for (let at = 0; at < bytes.length; at += CHUNK) yield { part: create(BlobPartSchema, { kind: { case: "chunk", value: bytes.subarray(at, at + CHUNK) } }) };
    })(),
    opts,
  );
  return res.blobId;
}

/** Downloads a blob into memory, checked against its header's size and sha256. */
export async function downloadBytes(client: Client<typeof BlobService>, blobId: string, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<{ bytes: Buffer; sha256: string }> {
  let header: { size: number; sha256: string } | undefined;
  const chunks: Uint8Array[] = [];
  let got = 0;
  for await (const res of client.downloadBlob({ blobId }, opts)) {
    const part = res.part;
    if (part?.kind.case === "header") {
      if (header) throw farmError(Errors.SCREENSHOT_TRANSFER_FAILED, "a second blob header arrived");
      header = { size: Number(part.kind.value.size), sha256: part.kind.value.sha256 };
      if (header.size > MAX_DOWNLOAD) throw farmError(Errors.SCREENSHOT_TOO_LARGE, `the blob is ${header.size} bytes`);
    } else if (part?.kind.case === "chunk") {
      if (!header) throw farmError(Errors.SCREENSHOT_TRANSFER_FAILED, "blob data arrived before its header");
      got += part.kind.value.length;
      if (got > header.size) throw farmError(Errors.SCREENSHOT_TRANSFER_FAILED, "the blob is larger than announced");
      chunks.push(part.kind.value);
    }
  }
  if (!header) throw farmError(Errors.SCREENSHOT_TRANSFER_FAILED, "the blob transfer carried no header");
  const bytes = Buffer.concat(chunks);
  const sha256 = sha256Hex(bytes);
  if (bytes.length !== header.size || sha256 !== header.sha256) {
    throw farmError(Errors.SCREENSHOT_TRANSFER_FAILED, `the screenshot arrived damaged (${bytes.length} of ${header.size} bytes, sha256 ${sha256})`);
  }
  return { bytes, sha256 };
}
