import { createHash } from "node:crypto";
import { Errors, type FarmErrorSpec } from "@farm/shared/error-codes";
import type { BlobPart } from "@farm/shared/gen/farm/v1/blob_pb";
import { FarmError } from "./farm-error.js";

/** How a reader names what it reads in its failures: the code of a broken transfer, the refusal of a blob too large, and the noun of "… arrived damaged". */
export interface BlobReadTerms {
  transferFailed: FarmErrorSpec;
  tooLarge: (size: number, maxBytes: number) => FarmError;
  noun: string;
}

/** A blob read into memory by the library: EVIDENCE_TRANSFER_FAILED, RESOURCE_EXHAUSTED with the limit. */
export const BLOB_TERMS: BlobReadTerms = {
  transferFailed: Errors.EVIDENCE_TRANSFER_FAILED,
  tooLarge: (size, maxBytes) => new FarmError(Errors.RESOURCE_EXHAUSTED, `the blob is ${size} bytes; at most ${maxBytes} are read into memory`, "size", null),
  noun: "blob",
};

/**
 * Received blob parts as bytes in memory, checked against their header:
 * the announced size is judged against `maxBytes` before any data is
 * kept, and the bytes must match the header's size and sha256.
 */
export async function readBlobBytes(parts: AsyncIterable<BlobPart | undefined>, maxBytes: number, terms: BlobReadTerms = BLOB_TERMS): Promise<{ bytes: Buffer; sha256: string }> {
  let header: { size: number; sha256: string } | undefined;
  const chunks: Buffer[] = [];
  let got = 0;
  const hash = createHash("sha256");
  const failed = (message: string) => new FarmError(terms.transferFailed, message, undefined, null);
  for await (const part of parts) {
    if (part?.kind.case === "header") {
      if (header) throw failed("a second blob header arrived");
      header = { size: Number(part.kind.value.size), sha256: part.kind.value.sha256 };
      if (header.size > maxBytes) throw terms.tooLarge(header.size, maxBytes);
    } else if (part?.kind.case === "chunk") {
      if (!header) throw failed("blob data arrived before its header");
      got += part.kind.value.length;
      if (got > header.size) throw failed("the blob is larger than announced");
      hash.update(part.kind.value);
      chunks.push(Buffer.from(part.kind.value));
    }
  }
  if (!header) throw failed("the blob transfer carried no header");
  const sha256 = hash.digest("hex");
  if (got !== header.size || sha256 !== header.sha256) throw failed(`the ${terms.noun} arrived damaged (${got} of ${header.size} bytes, sha256 ${sha256})`);
  return { bytes: Buffer.concat(chunks, got), sha256 };
}
