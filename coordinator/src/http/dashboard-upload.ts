import { randomUUID } from "node:crypto";
import { open, rm } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import { join } from "node:path";
import { fileAsBlobParts } from "@farm/shared/blob-parts";
import { DEVICE_FILE_MAX_BYTES } from "@farm/shared/device-files";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import { authenticateUser, isCrossSite } from "../auth/auth.js";
import { roleAtLeast, type TokenStore } from "../auth/token-store.js";
import type { WebSessions } from "../auth/web-sessions.js";
import { ownerOf } from "../evidence/blob-service.js";
import type { BlobStore } from "../evidence/blob-store.js";
import { headersOf } from "./request-headers.js";

export interface UploadDeps {
  web: WebSessions;
  tokens: TokenStore;
  blobs: BlobStore;
}

/** Where the browser uploads a file, and the most it may send there. */
export const DASHBOARD_UPLOAD_PATH = "/dashboard/api/blobs";
export const DASHBOARD_UPLOAD_MAX_BYTES = DEVICE_FILE_MAX_BYTES;

/** A file name for humans, kept with the blob (never a path). */
const NAME = /^[^/\\\0]{1,200}$/;

/**
 * `POST /dashboard/api/blobs?name=NAME`: a file from the browser (the
 * Files tab) into the blob store, the way BlobService.UploadBlob takes one
 * from the CLI; browsers cannot stream a request over HTTP/1.1 RPC. The
 * session cookie authenticates (same origin only, an operator at least);
 * the size comes from Content-Length and is refused past the limit before
 * a byte is read, and the body may not run past it. Answers `{blobId}`.
 */
export async function uploadBlob(deps: UploadDeps, req: IncomingMessage | Http2ServerRequest, url: URL): Promise<{ blobId: string }> {
  const headers = headersOf(req);
  if (isCrossSite(headers)) throw farmError(Errors.PERMISSION_DENIED, "cross-site upload refused");
  const principal = await authenticateUser(deps.tokens, headers, deps.web);
  if (!roleAtLeast(principal.role, "operator")) throw farmError(Errors.PERMISSION_DENIED, "uploading a file needs an operator");
  const name = url.searchParams.get("name") ?? "";
  if (!NAME.test(name)) throw invalidArgument("name", "name is 1..200 characters without / \\ or NUL");
  const length = headers.get("content-length");
  if (length === null || !/^\d{1,12}$/.test(length)) throw invalidArgument("content-length", "an upload states its size (Content-Length)");
  const size = Number(length);
  if (size > DASHBOARD_UPLOAD_MAX_BYTES) throw farmError(Errors.FILE_TOO_LARGE, `the file is ${size} bytes; uploads are at most ${DASHBOARD_UPLOAD_MAX_BYTES}`, "content-length");
  // The owner's blob quota too, before a byte is read (the store checks it again as it takes the file).
  if ((await deps.blobs.usage(ownerOf(principal))) + size > deps.blobs.quotaBytes) {
    throw farmError(Errors.QUOTA_EXCEEDED, `this upload would pass your blob quota of ${deps.blobs.quotaBytes} bytes; wait for earlier uploads to be used or expire`, "content-length");
  }
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
