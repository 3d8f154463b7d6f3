import { rm, stat } from "node:fs/promises";
import { basename } from "node:path";
import { create } from "@bufbuild/protobuf";
import { Errors, farmError } from "./errors.js";
import { BlobPartSchema, type BlobPart } from "./gen/farm/v1/blob_pb.js";
import { readChunks, sha256File, VerifiedFileWriter } from "./verified-file.js";

/** A file as blob parts: the header (size, sha256, name), then its chunks. */
export async function* fileAsBlobParts(path: string, name = basename(path)): AsyncGenerator<BlobPart> {
  const { size } = await stat(path);
  const sha256 = await sha256File(path);
  yield create(BlobPartSchema, { kind: { case: "header", value: { size: BigInt(size), sha256, name } } });
  for await (const chunk of readChunks(path)) yield create(BlobPartSchema, { kind: { case: "chunk", value: chunk } });
}

/**
 * Writes received blob parts into a new file (0600), checked against the
 * header; a damaged or incomplete transfer leaves no file behind.
 */
export async function writeBlobParts(parts: AsyncIterable<BlobPart | undefined>, path: string): Promise<{ size: number; sha256: string; name: string }> {
  let file: VerifiedFileWriter | undefined;
  let name = "";
  try {
    for await (const part of parts) {
      if (part?.kind.case === "header") {
        if (file) throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, "a second blob header arrived");
        name = part.kind.value.name;
        file = await VerifiedFileWriter.create(path, { size: Number(part.kind.value.size), sha256: part.kind.value.sha256 });
      } else if (part?.kind.case === "chunk") {
        if (!file) throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, "blob data arrived before its header");
        if (!(await file.write(part.kind.value))) throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, "the blob is larger than announced");
      }
    }
    if (!file) throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, "the blob transfer carried no header");
    const got = await file.finish();
    if (!got.ok) throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, `the file arrived damaged (${got.size} bytes, sha256 ${got.sha256})`);
    return { size: got.size, sha256: got.sha256, name };
  } catch (err) {
    await file?.abort();
    await rm(path, { force: true });
    throw err;
  }
}
