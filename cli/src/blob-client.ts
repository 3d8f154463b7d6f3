import { randomBytes } from "node:crypto";
import { access, rename } from "node:fs/promises";
import { constants } from "node:fs";
import type { Client } from "@connectrpc/connect";
import { fileAsBlobParts, writeBlobParts } from "@farm/shared/blob-parts";
import { Errors } from "@farm/shared/errors";
import { CliError } from "./cli-error.js";
import type { BlobService } from "@farm/shared/gen/farm/v1/blob_service_pb";
import type { BlobPart } from "@farm/shared/gen/farm/v1/blob_pb";
import type { TransferMeter } from "./progress/progress.js";

/** Feeds a meter from blob parts as they pass: the header's size, then each chunk. */
async function* metered(parts: AsyncIterable<BlobPart | undefined>, meter: TransferMeter | undefined): AsyncGenerator<BlobPart | undefined> {
  for await (const part of parts) {
    if (meter && part?.kind.case === "header") meter.setTotal(Number(part.kind.value.size));
    else if (meter && part?.kind.case === "chunk") meter.add(part.kind.value.length);
    yield part;
  }
}

/** Streams a local file to the coordinator's blob store; returns its id. */
export async function uploadFile(client: Client<typeof BlobService>, file: string, meter?: TransferMeter): Promise<string> {
  try {
    await access(file, constants.R_OK);
  } catch (err) {
    throw new CliError(Errors.INVALID_ARGUMENT, `cannot read ${file}: ${(err as Error).message}`, "file");
  }
  const res = await client.uploadBlob(
    (async function* () {
      for await (const part of metered(fileAsBlobParts(file), meter)) if (part) yield { part };
    })(),
  );
  return res.blobId;
}

/** Downloads a blob into `file` (0600) atomically, checking size and sha256. */
export async function downloadFile(client: Client<typeof BlobService>, blobId: string, file: string, meter?: TransferMeter): Promise<{ size: number; sha256: string }> {
  // Unique per call, not per process: runs of the CLI in one process (tests) may download to one file at once.
  const tmp = `${file}.part-${process.pid}-${randomBytes(4).toString("hex")}`;
  const got = await writeBlobParts(
    metered(
      (async function* () {
        for await (const res of client.downloadBlob({ blobId })) yield res.part;
      })(),
      meter,
    ),
    tmp,
  );
  await rename(tmp, file);
  return got;
}
