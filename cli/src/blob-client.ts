import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { open, rename, rm, stat } from "node:fs/promises";
import { basename } from "node:path";
import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { CliError, ErrorCodes } from "@farm/shared/errors";
import { UploadBlobRequestSchema, type BlobService, type UploadBlobRequest } from "@farm/shared/gen/farm/v1/blob_service_pb";

const CHUNK = 1024 * 1024;

async function sha256Of(file: string): Promise<string> {
  const h = createHash("sha256");
  for await (const c of createReadStream(file, { highWaterMark: CHUNK })) h.update(c as Buffer);
  return h.digest("hex");
}

/** Streams a local file to the coordinator's blob store; returns its id. */
export async function uploadFile(client: Client<typeof BlobService>, file: string): Promise<string> {
  let size: number;
  try {
    size = (await stat(file)).size;
  } catch (err) {
    throw new CliError(ErrorCodes.invalidArgument, `cannot read ${file}: ${(err as Error).message}`, "file");
  }
  const sha256 = await sha256Of(file);
  async function* parts(): AsyncGenerator<UploadBlobRequest> {
    yield create(UploadBlobRequestSchema, { part: { kind: { case: "header", value: { size: BigInt(size), sha256, name: basename(file) } } } });
    for await (const chunk of createReadStream(file, { highWaterMark: CHUNK })) {
      yield create(UploadBlobRequestSchema, { part: { kind: { case: "chunk", value: new Uint8Array(chunk as Buffer) } } });
    }
  }
  return (await client.uploadBlob(parts())).blobId;
}

/** Downloads a blob into `file` (0600) atomically, checking size and sha256. */
export async function downloadFile(client: Client<typeof BlobService>, blobId: string, file: string): Promise<{ size: number; sha256: string }> {
  const tmp = `${file}.part-${process.pid}`;
  const fh = await open(tmp, "wx", 0o600);
  const hash = createHash("sha256");
  let header: { size: number; sha256: string } | undefined;
  let got = 0;
  try {
    for await (const res of client.downloadBlob({ blobId })) {
      const part = res.part?.kind;
      if (part?.case === "header") header = { size: Number(part.value.size), sha256: part.value.sha256 };
      else if (part?.case === "chunk") {
        got += part.value.length;
        hash.update(part.value);
        await fh.write(part.value);
      }
    }
    await fh.sync();
  } catch (err) {
    await fh.close();
    await rm(tmp, { force: true });
    throw err;
  }
  await fh.close();
  const sha = hash.digest("hex");
  if (!header || got !== header.size || sha !== header.sha256) {
    await rm(tmp, { force: true });
    throw new CliError(ErrorCodes.evidenceTransferFailed, `the file arrived damaged (${got} bytes, sha256 ${sha})`);
  }
  await rename(tmp, file);
  return header;
}
