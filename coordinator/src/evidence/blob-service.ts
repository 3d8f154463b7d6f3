import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { BlobService, DownloadBlobResponseSchema, UploadBlobResponseSchema } from "@farm/shared/gen/farm/v1/blob_service_pb";
import { AgentBlobService, GetBlobResponseSchema, PutBlobResponseSchema } from "@farm/shared/gen/farm/v1/agent_blob_service_pb";
import type { BlobStore } from "./blob-store.js";
import { requirePrincipal } from "../auth/auth.js";
import type { Principal } from "../auth/token-store.js";

/** Whose quota a blob counts against: the token that uploaded it. */
export function ownerOf(p: Pick<Principal, "kind" | "tokenName">): string {
  return `${p.kind}:${p.tokenName}`;
}

async function* partsOf<T extends { part?: import("@farm/shared/gen/farm/v1/blob_pb").BlobPart }>(requests: AsyncIterable<T>) {
  for await (const r of requests) yield r.part;
}

/** Callers: upload an APK, download a screenshot. */
export function registerBlobService(router: ConnectRouter, deps: { blobs: BlobStore }): void {
  router.service(BlobService, {
    async uploadBlob(requests, ctx) {
      return create(UploadBlobResponseSchema, { blobId: await deps.blobs.put(partsOf(requests), ownerOf(requirePrincipal(ctx))) });
    },
    async *downloadBlob(req) {
      for await (const part of deps.blobs.get(req.blobId)) yield create(DownloadBlobResponseSchema, { part });
      // A fetched blob has served its purpose.
      await deps.blobs.remove(req.blobId);
    },
  });
}

/** Agents: the same store. */
export function registerAgentBlobService(router: ConnectRouter, deps: { blobs: BlobStore }): void {
  router.service(AgentBlobService, {
    async putBlob(requests, ctx) {
      return create(PutBlobResponseSchema, { blobId: await deps.blobs.put(partsOf(requests), ownerOf(requirePrincipal(ctx))) });
    },
    async *getBlob(req) {
      for await (const part of deps.blobs.get(req.blobId)) yield create(GetBlobResponseSchema, { part });
    },
  });
}
