import { createContextKey, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { Errors, farmError } from "@farm/shared/errors";
import type { Principal, TokenStore } from "./token-store.js";
import { methodKey, refusal, type AccessRule } from "./access-rules.js";
import type { OpenCalls } from "./open-calls.js";
import { sessionIdFromCookie, type WebSessions } from "./web-sessions.js";
import { peerKey, type Peer } from "../http/peer.js";

/** Checks another replica's credential: the replica's id, or undefined. */
export interface ReplicaVerifier {
  verify(bearer: string): Promise<string | undefined>;
}

export const principalKey = createContextKey<Principal | undefined>(undefined, {
  description: "authenticated caller",
});

/**
 * Authenticates every RPC with a bearer token (or a dashboard session) and
 * checks it against the method's row in the access table (access-rules.ts).
 * Methods without a row are refused, so a new method cannot ship
 * unauthenticated by accident. With `calls`, every authenticated call is
 * tracked by token name so that revoking the token ends it.
 */
export function authInterceptor(
  store: TokenStore,
  rules: Readonly<Record<string, AccessRule>>,
  opts: { web?: WebSessions; insecure?: boolean; calls?: OpenCalls; replicas?: ReplicaVerifier } = {},
): Interceptor {
  const web = opts.web;
  return (next) => async (req) => {
    const method = methodKey(req.service, req.method);
    const rule = rules[method];
    if (!rule) {
      throw farmError(Errors.PERMISSION_DENIED, `no access rule for ${method}`);
    }
    if (rule.kind === "none") return next(req);
    requireSafeTransport(req.contextValues.get(peerKey), opts.insecure === true);
    const principal = await authenticateRequest(store, req.header, web, opts.replicas);
    const why = refusal(rule, principal, method);
    if (why) throw farmError(Errors.PERMISSION_DENIED, why);
    req.contextValues.set(principalKey, principal);
    return opts.calls ? opts.calls.run(principal.tokenName, req, next) : next(req);
  };
}

/**
 * A bearer token, or else a dashboard session cookie. A cookie-carried
 * request from another site is refused even though SameSite=Strict should
 * already keep the browser from sending it.
 */
export async function authenticateRequest(store: TokenStore, headers: Headers, web?: WebSessions, replicas?: ReplicaVerifier): Promise<Principal> {
  const authorization = headers.get("authorization");
  const replica = replicas && authorization ? /^Bearer\s+(farmr_\S+)$/i.exec(authorization) : null;
  if (replicas && replica) {
    const id = await replicas.verify(replica[1] as string);
    if (!id) throw farmError(Errors.UNAUTHENTICATED, "unknown coordinator replica credential");
    return { tokenName: `replica:${id}`, kind: "replica", role: null, admin: false };
  }
  const sessionId = sessionIdFromCookie(headers.get("cookie"));
  if (authorization || !web || !sessionId) return authenticate(store, authorization);
  if (isCrossSite(headers)) throw farmError(Errors.PERMISSION_DENIED, "cross-site request refused");
  const principal = await web.principal(sessionId);
  if (!principal) throw farmError(Errors.UNAUTHENTICATED, "dashboard session expired or signed out; sign in again");
  return principal;
}

/** A replica's bearer credential (authenticateRequest's first case). */
const REPLICA_BEARER = /^Bearer\s+farmr_\S+$/i;

/**
 * authenticateRequest on a Node request's headers, as the request gate
 * checks every call: a single Authorization header that is not a replica's
 * is checked as it is (what authenticateRequest does with it), without
 * building fetch Headers of the whole request first; anything else (a
 * cookie, a replica, repeated or missing headers) through `headersOf` and
 * authenticateRequest.
 */
export function authenticateNodeHeaders(
  store: TokenStore,
  node: Readonly<Record<string, string | string[] | undefined>>,
  headersOf: () => Headers,
  web?: WebSessions,
  replicas?: ReplicaVerifier,
): Promise<Principal> {
  const authorization = node["authorization"];
  if (typeof authorization === "string" && authorization !== "" && !(replicas && REPLICA_BEARER.test(authorization))) return authenticate(store, authorization);
  return authenticateRequest(store, headersOf(), web, replicas);
}

/** The dashboard's own HTTP endpoints are for people: an agent token gets nothing there. */
export async function authenticateUser(store: TokenStore, headers: Headers, web?: WebSessions): Promise<Principal> {
  const principal = await authenticateRequest(store, headers, web);
  if (principal.kind !== "user") throw farmError(Errors.PERMISSION_DENIED, "agent tokens get nothing from the dashboard; use a user token");
  return principal;
}

/** Credentials only over TLS or loopback, unless the operator passed --insecure. */
export function requireSafeTransport(peer: Peer, insecure: boolean): void {
  if (peer !== "cleartext" || insecure) return;
  throw farmError(
    Errors.INSECURE_TRANSPORT,
    "tokens are refused over cleartext from another machine: serve TLS (--tls-cert/--tls-key) or start the coordinator with --insecure on a trusted network",
  );
}

/** A browser request from another origin than the one it is sent to (unknown when either header is missing). */
export function isCrossSite(headers: Headers): boolean {
  const origin = headers.get("origin");
  if (!origin || !headers.get("host")) return false;
  try {
    return new URL(origin).host !== headers.get("host");
  } catch {
    return true;
  }
}

export async function authenticate(store: TokenStore, header: string | null): Promise<Principal> {
  const m = header ? /^Bearer\s+(\S+)$/i.exec(header) : null;
  if (!m) throw farmError(Errors.UNAUTHENTICATED, "missing bearer token");
  const result = await store.authenticate(m[1] as string);
  if (result === "unknown") throw farmError(Errors.UNAUTHENTICATED, "unknown token");
  if (result === "revoked") throw farmError(Errors.UNAUTHENTICATED, "token has been revoked");
  return result;
}

export function requirePrincipal(ctx: HandlerContext): Principal {
  const p = ctx.values.get(principalKey);
  if (!p) throw farmError(Errors.UNAUTHENTICATED, "not authenticated");
  return p;
}
