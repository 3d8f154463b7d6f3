import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { open, stat } from "node:fs/promises";
import { create } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import { AgentBlobService, PutBlobRequestSchema, type PutBlobRequest } from "@farm/shared/gen/farm/v1/agent_blob_service_pb";
import { hashFile, CHUNK_BYTES } from "./evidence/evidence-upload.js";

/** Uploads a file to the coordinator's blob store; returns the blob id. */
export async function putBlob(transport: Transport, file: string, name: string): Promise<{ blobId: string; size: number; sha256: string }> {
  const { size } = await stat(file);
  const sha256 = await hashFile(file);
  async function* parts(): AsyncGenerator<PutBlobRequest> {
    yield create(PutBlobRequestSchema, { part: { kind: { case: "header", value: { size: BigInt(size), sha256, name } } } });
    for await (const chunk of createReadStream(file, { highWaterMark: CHUNK_BYTES })) {
      yield create(PutBlobRequestSchema, { part: { kind: { case: "chunk", value: new Uint8Array(chunk as Buffer) } } });
    }
  }
  const res = await createClient(AgentBlobService, transport).putBlob(parts());
  return { blobId: res.blobId, size, sha256 };
}

/** Downloads a blob into `file` (0600), checking its size and sha256. */
export async function getBlob(transport: Transport, blobId: string, file: string, signal?: AbortSignal): Promise<{ size: number; sha256: string; name: string }> {
  const fh = await open(file, "wx", 0o600);
  const hash = createHash("sha256");
  let header: { size: number; sha256: string; name: string } | undefined;
  let got = 0;
  try {
    for await (const res of createClient(AgentBlobService, transport).getBlob({ blobId }, signal ? { signal } : {})) {
      const part = res.part?.kind;
      if (part?.case === "header") header = { size: Number(part.value.size), sha256: part.value.sha256, name: part.value.name };
      else if (part?.case === "chunk") {
        got += part.value.length;
        hash.update(part.value);
        await fh.write(part.value);
      }
    }
    await fh.sync();
  } finally {
    await fh.close();
  }
  const sha = hash.digest("hex");
  if (!header || got !== header.size || sha !== header.sha256) throw new Error(`blob ${blobId} arrived damaged (${got} bytes, sha256 ${sha})`);
  return header;
}
