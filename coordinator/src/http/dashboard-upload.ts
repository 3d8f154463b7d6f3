import { randomUUID } from "node:crypto";
import { open, rm } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { fileAsBlobParts } from "@farm/shared/blob-parts";
import { BlobPartSchema, type BlobPart } from "@farm/shared/gen/farm/v1/blob_pb";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import { authenticateUser, isCrossSite } from "../auth/auth.js";
import { roleAtLeast, type TokenStore } from "../auth/token-store.js";
import type { WebSessions } from "../auth/web-sessions.js";
import { ownerOf } from "../evidence/blob-service.js";
import type { BlobStore } from "../evidence/blob-store.js";
import { headersOf } from "./request-headers.js";
import { DASHBOARD_UPLOAD_MAX_BYTES } from "./message-limits.js";

export interface UploadDeps {
  web: WebSessions;
  tokens: TokenStore;
  blobs: BlobStore;
}

/** A file name for humans, kept with the blob (never a path). */
const NAME = /^[^/\\\0]{1,200}$/;

/**
 * `POST /dashboard/api/blobs`: a file from the browser (an APK for the Apps
 * tab, a file for the Files tab) into the blob store, the way
 * BlobService.UploadBlob takes one from the CLI; browsers cannot stream a
 * request over HTTP/1.1 RPC. The session cookie authenticates (same origin
 * only, an operator at least); the size comes from Content-Length and is
 * refused past the limit before a byte is read, and the body may not run
 * past it. Its name comes as `?name=` or a URI-encoded `x-farm-name`. With
 * `x-farm-sha256` the body streams into the store, which checks it against
 * that digest; without (a page served over plain http has no WebCrypto to
 * hash it), it is staged to a 0600 file and hashed here. Answers `{blobId}`.
 */
export async function uploadBlob(deps: UploadDeps, req: IncomingMessage | Http2ServerRequest, url: URL): Promise<{ blobId: string }> {
  const headers = headersOf(req);
  if (isCrossSite(headers)) throw farmError(Errors.PERMISSION_DENIED, "cross-site upload refused");
  const principal = await authenticateUser(deps.tokens, headers, deps.web);
  if (!roleAtLeast(principal.role, "operator")) throw farmError(Errors.PERMISSION_DENIED, "uploading a file needs an operator");
  const sha256 = headers.get("x-farm-sha256");
  if (sha256 !== null && !/^[0-9a-f]{64}$/.test(sha256)) throw invalidArgument("sha256", "send the file's sha256 (64 lowercase hex digits) as x-farm-sha256");
  const name = nameOf(url, headers.get("x-farm-name"));
  const length = headers.get("content-length");
  if (length === null || !/^\d{1,12}$/.test(length)) throw invalidArgument("content-length", "an upload states its size (Content-Length)");
  const size = Number(length);
  if (size > DASHBOARD_UPLOAD_MAX_BYTES) throw farmError(Errors.FILE_TOO_LARGE, `the file is ${size} bytes; uploads are at most ${DASHBOARD_UPLOAD_MAX_BYTES}`, "content-length");
  // The owner's blob quota too, before a byte is read (the store checks it again as it takes the file).
  if ((await deps.blobs.usage(ownerOf(principal))) + size > deps.blobs.quotaBytes) {
    throw farmError(Errors.QUOTA_EXCEEDED, `this upload would pass your blob quota of ${deps.blobs.quotaBytes} bytes; wait for earlier uploads to be used or expire`, "content-length");
  }
  if (sha256 !== null) return { blobId: await deps.blobs.put(streamedParts(req, size, sha256, name), ownerOf(principal)) };
  const staged = join(deps.blobs.dir, `upload-${randomUUID()}`);
  const fh = await open(staged, "wx", 0o600);
  try {
    let got = 0;
    try {
      for await (const chunk of req as AsyncIterable<Buffer>) {
        got += chunk.length;
        if (got > size) throw invalidArgument("content-length", "the body runs past its Content-Length");
        await fh.write(chunk);
      }
      if (got !== size) throw invalidArgument("content-length", `the body ended after ${got} of ${size} bytes`);
      await fh.sync();
    } finally {
      await fh.close();
    }
    return { blobId: await deps.blobs.put(fileAsBlobParts(staged, name), ownerOf(principal)) };
  } finally {
    await rm(staged, { force: true });
  }
}

function nameOf(url: URL, header: string | null): string {
  let name = url.searchParams.get("name");
  if (name === null && header !== null) {
    try {
      name = decodeURIComponent(header);
    } catch {
      throw invalidArgument("name", "x-farm-name must be URI-encoded");
    }
  }
  if (name === null || name === "") return "upload";
  if (!NAME.test(name)) throw invalidArgument("name", "name is 1..200 characters without / \\ or NUL");
  return name;
}

/** The body as blob parts under an announced size and digest (the store verifies both as it writes). */
async function* streamedParts(req: AsyncIterable<Buffer>, size: number, sha256: string, name: string): AsyncGenerator<BlobPart> {
  yield create(BlobPartSchema, { kind: { case: "header", value: { size: BigInt(size), sha256, name } } });
  for await (const chunk of req) {
    for (let at = 0; at < chunk.length; at += CHUNK) yield create(BlobPartSchema, { kind: { case: "chunk", value: chunk.subarray(at, at + CHUNK) } });
  }
}

/** Parts of at most 1 MiB, as UploadBlob's are. */
const CHUNK = 1024 * 1024;
