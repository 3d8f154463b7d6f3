import { randomBytes } from "node:crypto";
import type { Principal, TokenStore } from "./token-store.js";

export const SESSION_COOKIE = "farm_session";
/** A dashboard sign-in lasts this long; then the user signs in again. */
export const SESSION_TTL_MS = 12 * 3_600_000;
const MAX_SESSIONS = 10_000;
/** Live sign-ins per user token; a new one evicts that user's oldest. */
export const MAX_SESSIONS_PER_USER = 10;

interface WebSession {
  /** Kept in memory only, to re-check revocation on every use; never logged or written. */
  token: string;
  /** The token's name, to find a user's sessions (cap, revocation). */
  tokenName: string;
  expiresAt: number;
}

/**
 * Browser sign-ins: a user token exchanged for a random session id carried
 * in an HttpOnly, SameSite=Strict cookie. The token is re-authenticated on
 * every request, so revoking it ends its sessions at once. Sessions live in
 * memory: a coordinator restart signs everyone out.
 */
export class WebSessions {
  private readonly sessions = new Map<string, WebSession>();

  constructor(private readonly tokens: TokenStore) {}

  /** Signs in with a user token; agent tokens and unknown or revoked tokens are refused. */
  signIn(token: string, now = Date.now()): { id: string; principal: Principal } | { error: string } {
    const p = this.tokens.authenticate(token);
    if (p === "unknown" || p === "revoked") return { error: p === "unknown" ? "unknown token" : "token has been revoked" };
    if (p.kind !== "user") return { error: "agent tokens cannot sign in to the dashboard; use a user token" };
    this.prune(now);
    // One user signing in over and over evicts only their own oldest sessions, never locks others out.
    const own = [...this.sessions].filter(([, s]) => s.tokenName === p.tokenName);
    for (const [old] of own.slice(0, Math.max(0, own.length - MAX_SESSIONS_PER_USER + 1))) this.sessions.delete(old);
    if (this.sessions.size >= MAX_SESSIONS) return { error: "too many dashboard sessions; try again later" };
    const id = randomBytes(32).toString("base64url");
    this.sessions.set(id, { token, tokenName: p.tokenName, expiresAt: now + SESSION_TTL_MS });
    return { id, principal: p };
  }

  principal(id: string, now = Date.now()): Principal | undefined {
    const s = this.sessions.get(id);
    if (!s) return undefined;
    if (s.expiresAt <= now) {
      this.sessions.delete(id);
      return undefined;
    }
    const p = this.tokens.authenticate(s.token);
    if (p === "unknown" || p === "revoked" || p.kind !== "user") {
      this.sessions.delete(id);
      return undefined;
    }
    return p;
  }

  signOut(id: string): void {
    this.sessions.delete(id);
  }

  /** Ends every session signed in with this token (it was revoked); returns how many. */
  endSessionsOf(tokenName: string): number {
    let n = 0;
    for (const [id, s] of this.sessions) {
      if (s.tokenName !== tokenName) continue;
      this.sessions.delete(id);
      n++;
    }
    return n;
  }

  /** Live sessions of one token, for tests. */
  countOf(tokenName: string): number {
    return [...this.sessions.values()].filter((s) => s.tokenName === tokenName).length;
  }

  private prune(now: number): void {
    for (const [id, s] of this.sessions) if (s.expiresAt <= now) this.sessions.delete(id);
  }
}

/** The session id in a Cookie header, if any. */
export function sessionIdFromCookie(header: string | null | undefined): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === SESSION_COOKIE) return v.join("=") || undefined;
  }
  return undefined;
}
