import { Code, createContextKey, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { ErrorCodes, farmError } from "@farm/shared/errors";
import type { Principal, TokenKind, TokenStore } from "./token-store.js";
import { sessionIdFromCookie, type WebSessions } from "./web-sessions.js";
import { INSECURE_TRANSPORT } from "@farm/shared/transport-security";
import { peerKey, type Peer } from "./peer.js";

/** What a service demands of its callers. */
export interface AccessRule {
  kind: TokenKind | "none";
  admin?: boolean;
}

export const principalKey = createContextKey<Principal | undefined>(undefined, {
  description: "authenticated caller",
});

/**
 * Authenticates every RPC with a bearer token and checks the token's kind
 * against the service's rule. Services not in the table are refused, so a new
 * service cannot ship unauthenticated by accident.
 */
export function authInterceptor(store: TokenStore, rules: Record<string, AccessRule>, opts: { web?: WebSessions; insecure?: boolean } = {}): Interceptor {
  const web = opts.web;
  return (next) => async (req) => {
    const rule = rules[req.service.typeName];
    if (!rule) {
      throw farmError(Code.PermissionDenied, ErrorCodes.permissionDenied, `no access rule for ${req.service.typeName}`);
    }
    if (rule.kind === "none") return next(req);
    requireSafeTransport(req.contextValues.get(peerKey), opts.insecure === true);
    const principal = authenticateRequest(store, req.header, web);
    if (principal.kind !== rule.kind) {
      throw farmError(
        Code.PermissionDenied,
        ErrorCodes.permissionDenied,
        `a ${principal.kind} token cannot call ${req.service.typeName}; it needs a ${rule.kind} token`,
      );
    }
    if (rule.admin && !principal.admin) {
      throw farmError(Code.PermissionDenied, ErrorCodes.permissionDenied, `${req.service.typeName} needs an admin user token`);
    }
    req.contextValues.set(principalKey, principal);
    return next(req);
  };
}

/**
 * A bearer token, or else a dashboard session cookie. A cookie-carried
 * request from another site is refused even though SameSite=Strict should
 * already keep the browser from sending it.
 */
export function authenticateRequest(store: TokenStore, headers: Headers, web?: WebSessions): Principal {
  const authorization = headers.get("authorization");
  const sessionId = sessionIdFromCookie(headers.get("cookie"));
  if (authorization || !web || !sessionId) return authenticate(store, authorization);
  if (isCrossSite(headers)) throw farmError(Code.PermissionDenied, ErrorCodes.permissionDenied, "cross-site request refused");
  const principal = web.principal(sessionId);
  if (!principal) throw farmError(Code.Unauthenticated, ErrorCodes.unauthenticated, "dashboard session expired or signed out; sign in again");
  return principal;
}

/** Credentials only over TLS or loopback, unless the operator passed --insecure. */
export function requireSafeTransport(peer: Peer, insecure: boolean): void {
  if (peer !== "cleartext" || insecure) return;
  throw farmError(
    Code.PermissionDenied,
    INSECURE_TRANSPORT,
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

export function authenticate(store: TokenStore, header: string | null): Principal {
  const m = header ? /^Bearer\s+(\S+)$/i.exec(header) : null;
  if (!m) throw farmError(Code.Unauthenticated, ErrorCodes.unauthenticated, "missing bearer token");
  const result = store.authenticate(m[1] as string);
  if (result === "unknown") throw farmError(Code.Unauthenticated, ErrorCodes.unauthenticated, "unknown token");
  if (result === "revoked") throw farmError(Code.Unauthenticated, ErrorCodes.unauthenticated, "token has been revoked");
  return result;
}

export function requirePrincipal(ctx: HandlerContext): Principal {
  const p = ctx.values.get(principalKey);
  if (!p) throw farmError(Code.Unauthenticated, ErrorCodes.unauthenticated, "not authenticated");
  return p;
}
