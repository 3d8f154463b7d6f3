import { readFile } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { extname, join, normalize, sep } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { withoutHostPaths } from "@farm/shared/host-paths";
import { create } from "@bufbuild/protobuf";
import { Errors, farmError, toErrorReport } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import { authenticateUser, isCrossSite, requireSafeTransport } from "../auth/auth.js";
import { peerOf } from "./peer.js";
import type { EvidenceStore } from "../evidence/evidence-store.js";
import type { SessionImageStore } from "../sessions/session-image-store.js";
import type { SessionSteps } from "../sessions/session-steps.js";
import type { TokenStore } from "../auth/token-store.js";
import { SESSION_COOKIE, SESSION_TTL_MS, sessionIdFromCookie, type WebSessions } from "../auth/web-sessions.js";
import { headersOf } from "./request-headers.js";
import { uploadBlob } from "./dashboard-upload.js";
import type { BlobStore } from "../evidence/blob-store.js";

type Req = IncomingMessage | Http2ServerRequest;
type Res = ServerResponse | Http2ServerResponse;

export const DASHBOARD_PREFIX = "/dashboard/";
const MAX_BODY = 8 * 1024;
const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".woff2": "font/woff2",
};
// The app needs nothing from elsewhere: no CDN, no inline script.
const SECURITY_HEADERS = {
  "content-security-policy": "default-src 'self'; img-src 'self' blob: data:; media-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

export interface DashboardDeps {
  web: WebSessions;
  tokens: TokenStore;
  evidence: EvidenceStore;
  /** Session screenshots, served only under a session that shows them. */
  sessionImages?: { steps: SessionSteps; images: SessionImageStore };
  /** Where browser uploads go (POST api/blobs); without it, uploads are not served. */
  blobs?: BlobStore;
  /** Built assets (index.html, assets/); null when the dashboard was not built. */
  assetsDir: string | null;
  /** Allow sign-in and files over cleartext from other machines. */
  insecure: boolean;
  log: Logger;
}

/**
 * The dashboard's own HTTP surface next to the RPC services: its static
 * assets, sign-in and sign-out (a user token for an HttpOnly session
 * cookie), and evidence files for the browser (with Range, for video).
 * Data travels only over the same RPC services the CLI uses.
 */
export function dashboardHandler(deps: DashboardDeps): (req: Req, res: Res) => Promise<boolean> {
  return async (req, res) => {
    const url = new URL(req.url ?? "/", "http://farm.invalid");
    const path = url.pathname;
    if (path === "/" || path === "/dashboard") {
      res.writeHead(302, { location: DASHBOARD_PREFIX });
      res.end();
      return true;
    }
    if (!path.startsWith(DASHBOARD_PREFIX)) return false;
    const rest = path.slice(DASHBOARD_PREFIX.length);
    try {
      if (rest.startsWith("api/") || rest.startsWith("files/")) requireSafeTransport(peerOf(req), deps.insecure);
      if (rest === "api/sign-in" && req.method === "POST") return await signIn(deps, req, res);
      if (rest === "api/sign-out" && req.method === "POST") return await signOut(deps, req, res);
      if (rest === "api/me" && req.method === "GET") return await me(deps, req, res);
      if (rest === "api/blobs" && req.method === "POST" && deps.blobs) return (json(res, 200, await uploadBlob({ ...deps, blobs: deps.blobs }, req, url)), true);
      if (rest.startsWith("files/evidence/") && (req.method === "GET" || req.method === "HEAD")) return await evidenceFile(deps, req, res, rest.slice("files/evidence/".length), url);
      if (rest.startsWith("files/session-images/") && (req.method === "GET" || req.method === "HEAD")) return await sessionImage(deps, req, res, rest.slice("files/session-images/".length));
      if (req.method === "GET" || req.method === "HEAD") return await asset(deps, res, rest);
      json(res, 405, { code: Errors.METHOD_NOT_ALLOWED.code, message: `${req.method} is not allowed here` });
      return true;
    } catch (err) {
      const r = toErrorReport(err);
      const status = HTTP_STATUS[r.code] ?? 500;
      // A failure of this host (storage, a bug) at error level; the caller's own at warn.
      (status === 500 ? deps.log.error : deps.log.warn).call(deps.log, "dashboard request failed", { path, code: r.code, error: r.message });
      // The browser gets no host paths (a file the store could not open); the log keeps them.
      json(res, status, { code: r.code, message: withoutHostPaths(r.message), ...(r.field ? { field: r.field } : {}) });
      return true;
    }
  };
}

/** HTTP statuses of the error codes the dashboard's own endpoints answer with; any other is the host's failure (500). */
const HTTP_STATUS: Record<string, number> = {
  [Errors.UNAUTHENTICATED.code]: 401,
  [Errors.PERMISSION_DENIED.code]: 403,
  [Errors.INSECURE_TRANSPORT.code]: 403,
  [Errors.INVALID_ARGUMENT.code]: 400,
  [Errors.MESSAGE_TOO_LARGE.code]: 413,
  [Errors.FILE_TOO_LARGE.code]: 413,
  [Errors.QUOTA_EXCEEDED.code]: 429,
};

function json(res: Res, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store", ...SECURITY_HEADERS, ...headers });
  res.end(JSON.stringify(body));
}

function cookie(req: Req, value: string, maxAgeS: number): string {
  const secure = "encrypted" in req.socket && req.socket.encrypted ? "; Secure" : "";
  return `${SESSION_COOKIE}=${value}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${maxAgeS}${secure}`;
}

async function readBody(req: Req): Promise<string | undefined> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

async function signIn(deps: DashboardDeps, req: Req, res: Res): Promise<boolean> {
  if (isCrossSite(headersOf(req))) return (json(res, 403, { code: Errors.PERMISSION_DENIED.code, message: "cross-site sign-in refused" }), true);
  const body = await readBody(req);
  let token: unknown;
  try {
    token = body === undefined ? undefined : (JSON.parse(body) as { token?: unknown }).token;
  } catch {
    token = undefined;
  }
  if (typeof token !== "string" || token.trim() === "") {
    json(res, 400, { code: Errors.INVALID_ARGUMENT.code, field: "token", message: "send {\"token\": \"farmu_…\"} with a user token" });
    return true;
  }
  const r = await deps.web.signIn(token.trim());
  if ("error" in r) {
    deps.log.info("dashboard sign-in refused", { reason: r.error });
    json(res, 401, { code: Errors.UNAUTHENTICATED.code, message: r.error });
    return true;
  }
  deps.log.info("dashboard sign-in", { user: r.principal.tokenName });
  json(res, 200, { name: r.principal.tokenName, role: r.principal.role, admin: r.principal.admin }, { "set-cookie": cookie(req, r.id, SESSION_TTL_MS / 1000) });
  return true;
}

async function signOut(deps: DashboardDeps, req: Req, res: Res): Promise<boolean> {
  if (isCrossSite(headersOf(req))) return (json(res, 403, { code: Errors.PERMISSION_DENIED.code, message: "cross-site sign-out refused" }), true);
  const id = sessionIdFromCookie(headersOf(req).get("cookie"));
  if (id) await deps.web.signOut(id);
  res.writeHead(204, { "set-cookie": cookie(req, "", 0), "cache-control": "no-store" });
  res.end();
  return true;
}

async function me(deps: DashboardDeps, req: Req, res: Res): Promise<boolean> {
  const p = await authenticateUser(deps.tokens, headersOf(req), deps.web);
  json(res, 200, { name: p.tokenName, role: p.role, admin: p.admin });
  return true;
}

const idPattern = /^[0-9a-f-]{36}$/;
const filePattern = /^[A-Za-z0-9._-]+$/;

/**
 * A session's file (`<session id>/<sha256>.png` for a screenshot, or
 * `<session id>/<sha256>` for any): content-addressed, so cached for good.
 * Served as its stored media type, never sniffed.
 */
async function sessionImage(deps: DashboardDeps, req: Req, res: Res, rest: string): Promise<boolean> {
  await authenticateUser(deps.tokens, headersOf(req), deps.web);
  const m = /^([0-9a-f-]{36})\/([0-9a-f]{64})(\.png)?$/.exec(rest);
  const store = deps.sessionImages;
  const row = m && store ? await store.steps.image(m[1] as string, m[2] as string) : undefined;
  if (!m || !store || !row || (m[3] && row.mimeType !== "image/png")) return (json(res, 404, { code: Errors.NOT_FOUND.code, message: "no such file in that session" }), true);
  const size = (await store.images.sizeOf(row.sha256, row.mimeType)) ?? -1;
  if (size < 0) return (json(res, 404, { code: Errors.NOT_FOUND.code, message: "the screenshot's file is missing from the store" }), true);
  res.writeHead(200, { "content-type": row.mimeType, "content-length": String(size), "cache-control": "private, max-age=31536000, immutable", ...SECURITY_HEADERS });
  if (req.method === "HEAD") return (res.end(), true);
  await pipeBytes(store.images.read(row.sha256, row.mimeType), res);
  return true;
}

/** Sends stored bytes as the body, with backpressure; a read failure cuts the response. */
async function pipeBytes(chunks: AsyncIterable<Uint8Array>, res: Res): Promise<void> {
  await pipeline(Readable.from(chunks), res as NodeJS.WritableStream).catch(() => res.destroy());
}

/** One artifact of a stored bundle, for a signed-in browser (or a bearer token). */
async function evidenceFile(deps: DashboardDeps, req: Req, res: Res, rest: string, url: URL): Promise<boolean> {
  await authenticateUser(deps.tokens, headersOf(req), deps.web);
  const [id, file, ...extra] = rest.split("/");
  if (!id || !file || extra.length > 0 || !idPattern.test(id) || !filePattern.test(file)) return (json(res, 404, { code: Errors.NOT_FOUND.code, message: "no such file" }), true);
  if (!(await deps.evidence.has(id))) return (json(res, 404, { code: Errors.EVIDENCE_NOT_FOUND.code, message: `no bundle ${id}` }), true);
  const { manifest } = await deps.evidence.manifest(id);
  const artifact = file === "manifest.json" ? { mimeType: "application/json" } : manifest.artifacts.find((a) => a.path === file);
  if (!artifact) return (json(res, 404, { code: Errors.NOT_FOUND.code, message: `${file} is not part of bundle ${id}` }), true);
  const size = await deps.evidence.sizeOf(id, file);
  if (size === undefined) return (json(res, 404, { code: Errors.NOT_FOUND.code, message: `${file} of bundle ${id} is missing from the store` }), true);
  const headers: Record<string, string> = {
    "content-type": artifact.mimeType,
    "accept-ranges": "bytes",
    "cache-control": "private, max-age=3600",
    ...SECURITY_HEADERS,
    ...(url.searchParams.get("download") === "1" ? { "content-disposition": `attachment; filename="${id}-${file}"` } : {}),
  };
  const range = /^bytes=(\d*)-(\d*)$/.exec(String(req.headers["range"] ?? ""));
  let start = 0;
  let end = size - 1;
  let status = 200;
  if (range && (range[1] !== "" || range[2] !== "")) {
    start = range[1] === "" ? Math.max(0, size - Number(range[2])) : Number(range[1]);
    end = range[1] !== "" && range[2] !== "" ? Math.min(Number(range[2]), size - 1) : size - 1;
    if (start > end || start >= size) {
      res.writeHead(416, { "content-range": `bytes */${size}` });
      res.end();
      return true;
    }
    status = 206;
    headers["content-range"] = `bytes ${start}-${end}/${size}`;
  }
  headers["content-length"] = String(end - start + 1);
  res.writeHead(status, headers);
  if (req.method === "HEAD" || size === 0) {
    res.end();
    return true;
  }
  await pipeBytes(deps.evidence.read(id, file, { start, end: end + 1 }), res);
  return true;
}

async function asset(deps: DashboardDeps, res: Res, rest: string): Promise<boolean> {
  if (!deps.assetsDir) {
    res.writeHead(503, { "content-type": "text/plain; charset=utf-8" });
    res.end("the dashboard is not built on this coordinator (run `make build`)\n");
    return true;
  }
  // Unknown paths get the app, which routes by the URL's hash.
  const name = rest === "" || !rest.includes(".") ? "index.html" : rest;
  const full = normalize(join(deps.assetsDir, name));
  if (!full.startsWith(deps.assetsDir + sep)) return (json(res, 404, { code: Errors.NOT_FOUND.code, message: "no such file" }), true);
  let body: Buffer;
  try {
    body = await readFile(full);
  } catch {
    return (json(res, 404, { code: Errors.NOT_FOUND.code, message: "no such file" }), true);
  }
  // Built asset names carry a content hash: they never change.
  const cache = name.startsWith("assets/") ? "public, max-age=31536000, immutable" : "no-cache";
  res.writeHead(200, { "content-type": TYPES[extname(full)] ?? "application/octet-stream", "content-length": String(body.length), "cache-control": cache, ...SECURITY_HEADERS });
  res.end(body);
  return true;
}
