import type { Client } from "@connectrpc/connect";
import { Errors } from "@farm/shared/errors";
import type { BlobService } from "@farm/shared/gen/farm/v1/blob_service_pb";
import { readBlobBytes, type BlobReadTerms } from "@farm/client/blob-bytes";
import { blobParts, uploadFile } from "@farm/client/blob-files";
import { FarmError } from "@farm/client/farm-error";

/**
 * The small files of a check (a screenshot, a diff image, a diagnosis
 * JSON) to and from the blob store in memory, with the library's blob code
 * (client/src/blob-files.ts, blob-bytes.ts); its failures are a
 * screenshot's (SCREENSHOT_TRANSFER_FAILED, SCREENSHOT_TOO_LARGE).
 */

/** A screenshot is a few MiB; more than this is not one. */
const MAX_DOWNLOAD = 64 * 1024 * 1024;

const SCREENSHOT_TERMS: BlobReadTerms = {
  transferFailed: Errors.SCREENSHOT_TRANSFER_FAILED,
  tooLarge: (size) => new FarmError(Errors.SCREENSHOT_TOO_LARGE, `the blob is ${size} bytes`, undefined, null),
  noun: "screenshot",
};

/** Uploads bytes as a blob named `name`; returns its id. */
export function uploadBytes(client: Client<typeof BlobService>, bytes: Uint8Array, name: string, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<string> {
  return uploadFile(client, bytes, { name, call: opts });
}

/** Downloads a blob into memory, checked against its header's size and sha256. */
export function downloadBytes(client: Client<typeof BlobService>, blobId: string, opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<{ bytes: Buffer; sha256: string }> {
  return readBlobBytes(blobParts(client, blobId, opts), MAX_DOWNLOAD, SCREENSHOT_TERMS);
}
