import type { ConnectRouter } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import type { Logger } from "@farm/shared/log";
import { BLOB_MAX_BYTES } from "../evidence/blob-store.js";
import { withMalformedRequests } from "./malformed-request.js";
import { DEVICE_FILE_MAX_BYTES } from "@farm/shared/device-files";

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;

/** Largest evidence file an agent may upload (a 3-minute recording is far below). */
export const EVIDENCE_FILE_MAX_BYTES = 1 * GiB;
/** Largest evidence bundle, all files together. */
export const EVIDENCE_BUNDLE_MAX_BYTES = 2 * GiB;
/**
 * Largest still bundle: the agent's caps on a screenshot (64 MiB of PNG)
 * and a UI tree (32 MiB), with room for its JSON files. What a capture
 * reserves of its user's quota, so an upload past it is refused.
 */
export const STILL_BUNDLE_MAX_BYTES = 100 * MiB;

/** The largest bundle of a kind: what its capture reserves, and all its upload may announce. */
export function bundleMaxBytes(kind: "still" | "video"): number {
  return kind === "still" ? STILL_BUNDLE_MAX_BYTES : EVIDENCE_BUNDLE_MAX_BYTES;
}
/** Bodies of paths that are not RPCs (dashboard sign-in and the like). */
export const PLAIN_BODY_MAX_BYTES = 64 * KiB;
/** The dashboard's file upload (an APK for the Apps tab, a file for the Files tab): the one plain path that takes a file. */
export const DASHBOARD_UPLOAD_PATH = "/dashboard/api/blobs";
/** The most one browser upload may send (the largest file the Files tab pushes; APKs fit). */
export const DASHBOARD_UPLOAD_MAX_BYTES = DEVICE_FILE_MAX_BYTES;

/** What a plain (non-RPC) path's body may be. */
export function plainBodyMax(path: string): number {
  return path === DASHBOARD_UPLOAD_PATH ? DASHBOARD_UPLOAD_MAX_BYTES : PLAIN_BODY_MAX_BYTES;
}

/**
 * What one service's calls may carry. `messageMaxBytes` caps every message
 * (Connect's readMaxBytes, enforced while reading); `bodyMaxBytes` caps what
 * a request may announce in Content-Length, refused from the header.
 */
export interface MessageLimits {
  messageMaxBytes: number;
  bodyMaxBytes: number;
}

/**
 * Services whose messages are raw bytes on a hot path (a phone's adb
 * streams, its encoded screen, blobs, evidence bundles: PNG, MP4, APKs):
 * never gzipped. A 100 MiB blob download gzipped moved at 0.13 of a plain
 * TCP copy (test/bench/blob-transfer.ts). Connect compresses any response over 1 KiB for a
 * client that accepts gzip, which every Connect client does; on a 100 MiB
 * push that was most of a core for bytes that do not shrink (APKs, media),
 * and it capped a tunnel at a tenth of adb's own speed.
 */
const uncompressed: ReadonlySet<string> = new Set([
  "farm.v1.AdbTunnelService",
  "farm.v1.AgentAdbService",
  "farm.v1.LiveScreenService",
  "farm.v1.AgentScreenService",
  "farm.v1.BlobService",
  "farm.v1.AgentBlobService",
  "farm.v1.EvidenceService",
  "farm.v1.AgentEvidenceService",
]);

const control = (messageMaxBytes: number): MessageLimits => ({ messageMaxBytes, bodyMaxBytes: messageMaxBytes + 5 });
/** Long-lived or upload streams: many messages; the body as a whole is bounded by what it may carry. */
const stream = (messageMaxBytes: number, bodyMaxBytes: number): MessageLimits => ({ messageMaxBytes, bodyMaxBytes });

// Uploads send 1 MiB chunks; Connect's JSON encoding (base64) makes one up to 4/3 larger.
const chunked = 2 * MiB;

const byService: Readonly<Record<string, MessageLimits>> = {
  "grpc.health.v1.Health": control(4 * KiB),
  "farm.v1.RegistryService": control(64 * KiB),
  "farm.v1.TokenService": control(64 * KiB),
  "farm.v1.PrivacyService": control(4 * KiB),
  "farm.v1.LeaseService": control(64 * KiB),
  "farm.v1.ActivityService": control(64 * KiB),
  "farm.v1.WatchService": control(64 * KiB),
  "farm.v1.VideoService": control(64 * KiB),
  // A shell command (32 KiB) or evidence context and label, with room for JSON escaping.
  "farm.v1.DeviceService": control(256 * KiB),
  "farm.v1.EvidenceService": control(256 * KiB),
  // A device call passed on by another replica: its request (up to 256 KiB) inside an AgentCall
  // with a session step's capture plan and the screens already stored.
  "farm.v1.ReplicaService": control(512 * KiB),
  // Terminal input: small messages for as long as the session lasts.
  "farm.v1.ShellService": stream(256 * KiB, 4 * GiB),
  // Command results (shell output and stderr of 1 MiB each, an ownership journal of 4 MiB).
  "farm.v1.AgentService": stream(16 * MiB, 4 * GiB),
  "farm.v1.AgentShellService": stream(chunked, 4 * GiB),
  "farm.v1.BlobService": stream(chunked, 2 * BLOB_MAX_BYTES),
  "farm.v1.AgentBlobService": stream(chunked, 2 * BLOB_MAX_BYTES),
  // Remote adb: adb's payloads (at most 1 MiB) as bytes, for as long as a stream lasts (a push of a large file, logcat for hours).
  "farm.v1.AdbTunnelService": stream(chunked, 64 * GiB),
  "farm.v1.AgentAdbService": stream(chunked, 64 * GiB),
  // Live screen: a viewer's request; the agent's frames (an H.264 key frame or a JPEG, well under 8 MiB).
  "farm.v1.LiveScreenService": control(4 * KiB),
  "farm.v1.AgentScreenService": stream(9 * MiB, 1024 * GiB),
  // Live logcat: a viewer's request; the agent's batches (256 lines of at most 4 KiB, with framing).
  "farm.v1.LogcatService": control(4 * KiB),
  "farm.v1.AgentLogcatService": stream(2 * MiB, 1024 * GiB),
  // Chunks and the manifest.
  "farm.v1.AgentEvidenceService": stream(8 * MiB, 2 * EVIDENCE_BUNDLE_MAX_BYTES),
};

const unknownService = control(64 * KiB);

export function limitsOf(serviceTypeName: string): MessageLimits {
  return byService[serviceTypeName] ?? unknownService;
}

function handlerOptionsOf(serviceTypeName: string): { readMaxBytes: number; acceptCompression?: [] } {
  const readMaxBytes = limitsOf(serviceTypeName).messageMaxBytes;
  // No accepted compression: requests must come plain (ours do) and responses go plain.
  return uncompressed.has(serviceTypeName) ? { readMaxBytes, acceptCompression: [] } : { readMaxBytes };
}

/**
 * The router every service registers on, with its message cap applied:
 * no service is left at Connect's default of 4 GiB per message.
 */
export function withMessageLimits(router: ConnectRouter, log?: Logger): ConnectRouter {
  const limited: ConnectRouter = Object.create(router) as ConnectRouter;
  // A request that cannot be read is the caller's INVALID_ARGUMENT (malformed-request.ts).
  const correct = (from: number) => {
    if (log) { for (let i = from; i < router.handlers.length; i++) router.handlers[i] = withMalformedRequests(router.handlers[i] as UniversalHandler, log); }
  };
  limited.service = (service, implementation, options) => {
    const from = router.handlers.length;
    router.service(service, implementation, { ...handlerOptionsOf(service.typeName), ...options });
    correct(from);
    return limited;
  };
  limited.rpc = (method, implementation, options) => {
    const from = router.handlers.length;
    router.rpc(method, implementation, { ...handlerOptionsOf(method.parent.typeName), ...options });
    correct(from);
    return limited;
  };
  return limited;
}
