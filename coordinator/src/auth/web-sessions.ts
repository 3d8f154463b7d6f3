import { randomBytes } from "node:crypto";
import { hashToken, type Principal, type TokenStore } from "./token-store.js";
import type { WebSessionStore } from "./web-session-store.js";

export const SESSION_COOKIE = "farm_session";
/** A dashboard sign-in lasts this long; then the user signs in again. */
export const SESSION_TTL_MS = 12 * 3_600_000;
const MAX_SESSIONS = 10_000;
/** Live sign-ins per user token; a new one evicts that user's oldest. */
export const MAX_SESSIONS_PER_USER = 10;

/**
 * Browser sign-ins: a user token exchanged for a random session id carried
 * in an HttpOnly, SameSite=Strict cookie. Sessions live in the database
 * (only a hash of the id, and the token's name), so every coordinator of
 * the farm knows them and a restart signs no one out. The token is
 * re-checked by name on every use, so revoking it ends its sessions at once.
 */
export class WebSessions {
  constructor(
    private readonly tokens: TokenStore,
    private readonly store: WebSessionStore,
  ) {}

  /** Signs in with a user token; agent tokens and unknown or revoked tokens are refused. */
  async signIn(token: string, now = Date.now()): Promise<{ id: string; principal: Principal } | { error: string }> {
    const p = await this.tokens.authenticate(token);
    if (p === "unknown" || p === "revoked") return { error: p === "unknown" ? "unknown token" : "token has been revoked" };
    if (p.kind !== "user") return { error: "agent tokens cannot sign in to the dashboard; use a user token" };
    const id = randomBytes(32).toString("base64url");
    // One user signing in over and over evicts only their own oldest sessions, never locks others out.
    const row = { idHash: hashToken(id), tokenName: p.tokenName, createdAt: now, expiresAt: now + SESSION_TTL_MS };
    if (!(await this.store.add(row, { now, perUser: MAX_SESSIONS_PER_USER, total: MAX_SESSIONS }))) {
      return { error: "too many dashboard sessions; try again later" };
    }
    return { id, principal: p };
  }

  async principal(id: string, now = Date.now()): Promise<Principal | undefined> {
    const idHash = hashToken(id);
    const s = await this.store.get(idHash);
    if (!s) return undefined;
    if (s.expiresAt <= now) {
      await this.store.delete(idHash);
      return undefined;
    }
    const p = await this.tokens.principalByName(s.tokenName);
    if (p === "unknown" || p === "revoked" || p.kind !== "user") {
      await this.store.delete(idHash);
      return undefined;
    }
    return p;
  }

  signOut(id: string): Promise<void> {
    return this.store.delete(hashToken(id));
  }

  /** Ends every session signed in with this token (it was revoked); returns how many. */
  endSessionsOf(tokenName: string): Promise<number> {
    return this.store.deleteOf(tokenName);
  }

  /** Live sessions of one token, for tests. */
  countOf(tokenName: string, now = Date.now()): Promise<number> {
    return this.store.countOf(tokenName, now);
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
