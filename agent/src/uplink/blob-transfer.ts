import { randomUUID } from "node:crypto";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createClient, type Transport } from "@connectrpc/connect";
import { fileAsBlobParts, writeBlobParts } from "@farm/shared/blob-parts";
import { AgentBlobService } from "@farm/shared/gen/farm/v1/agent_blob_service_pb";

/** Uploads a file to the coordinator's blob store; returns the blob id. */
export async function putBlob(transport: Transport, file: string, name: string): Promise<{ blobId: string; size: number; sha256: string }> {
  let size = 0;
  let sha256 = "";
  const res = await createClient(AgentBlobService, transport).putBlob(
    (async function* () {
      for await (const part of fileAsBlobParts(file, name)) {
        if (part.kind.case === "header") [size, sha256] = [Number(part.kind.value.size), part.kind.value.sha256];
        yield { part };
      }
    })(),
  );
  return { blobId: res.blobId, size, sha256 };
}

/**
 * Uploads bytes held in memory: through a 0600 file in `stagingDir` (a
 * 0700 dir), since a blob is sent from a file, removed again whatever
 * happens.
 */
export async function putBlobBytes(transport: Transport, stagingDir: string, bytes: Uint8Array, name: string): Promise<{ blobId: string; size: number; sha256: string }> {
  await mkdir(stagingDir, { recursive: true, mode: 0o700 });
  const file = join(stagingDir, `blob-${randomUUID()}`);
  try {
    await writeFile(file, bytes, { mode: 0o600 });
    return await putBlob(transport, file, name);
  } finally {
    await rm(file, { force: true });
  }
}

/** Downloads a blob into `file` (0600), checking its size and sha256. */
export async function getBlob(transport: Transport, blobId: string, file: string, signal?: AbortSignal): Promise<{ size: number; sha256: string; name: string }> {
  return writeBlobParts(
    (async function* () {
      for await (const res of createClient(AgentBlobService, transport).getBlob({ blobId }, signal ? { signal } : {})) yield res.part;
    })(),
    file,
  );
}
