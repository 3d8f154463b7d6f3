import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { authenticateRequest, authenticateUser } from "./auth.js";
import { openDatabase } from "../db/open-database.js";
import { TokenStore } from "./token-store.js";
import { MAX_SESSIONS_PER_USER, SESSION_TTL_MS, sessionIdFromCookie, WebSessions } from "./web-sessions.js";

const dir = mkdtempSync(join(tmpdir(), "farm-web-"));
const db = openDatabase(join(dir, "c.db"));
afterAll(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("dashboard sessions", () => {
  const tokens = new TokenStore(db.db);
  const web = new WebSessions(tokens);
  const user = tokens.create("alice", "user");
  const agent = tokens.create("lab", "agent");

  it("exchange a user token for a random session id; agent and unknown tokens are refused", () => {
    const s = web.signIn(user.secret);
    if ("error" in s) throw new Error(s.error);
    expect(s.id).not.toContain(user.secret);
    expect(s.id.length).toBeGreaterThanOrEqual(40);
    expect(web.principal(s.id)).toMatchObject({ tokenName: "alice", kind: "user" });
    expect(web.signIn(agent.secret)).toMatchObject({ error: expect.stringContaining("agent tokens") });
    expect(web.signIn("farmu_nope")).toEqual({ error: "unknown token" });
  });

  it("end with sign-out, expiry, and the token's revocation", () => {
    const a = web.signIn(user.secret) as { id: string };
    web.signOut(a.id);
    expect(web.principal(a.id)).toBeUndefined();
    const b = web.signIn(user.secret) as { id: string };
    expect(web.principal(b.id, Date.now() + SESSION_TTL_MS + 1)).toBeUndefined();
    const c = web.signIn(user.secret) as { id: string };
    tokens.revoke("alice");
    expect(web.principal(c.id)).toBeUndefined();
  });

  it("authenticate requests by cookie, refusing other sites", () => {
    const bob = tokens.create("bob", "user", "admin");
    const s = web.signIn(bob.secret) as { id: string };
    const headers = (h: Record<string, string>) => new Headers(h);
    expect(authenticateRequest(tokens, headers({ cookie: `x=1; farm_session=${s.id}`, host: "farm:7420", origin: "http://farm:7420" }), web)).toMatchObject({ tokenName: "bob", admin: true });
    expect(() => authenticateRequest(tokens, headers({ cookie: `farm_session=${s.id}`, host: "farm:7420", origin: "http://evil.example" }), web)).toThrow(/cross-site/);
    expect(() => authenticateRequest(tokens, headers({ cookie: "farm_session=forged", host: "farm:7420" }), web)).toThrow(/sign in again/);
    // Without a dashboard, a cookie is no credential at all.
    expect(() => authenticateRequest(tokens, headers({ cookie: `farm_session=${s.id}` }))).toThrow(/bearer/);
    expect(sessionIdFromCookie("a=b; farm_session=xyz=; c=d")).toBe("xyz=");
    expect(sessionIdFromCookie(undefined)).toBeUndefined();
  });

  it("cap each user's live sessions, evicting that user's oldest, never another user's", () => {
    const carol = tokens.create("carol", "user", "viewer");
    const dave = tokens.create("dave", "user");
    const daves = web.signIn(dave.secret) as { id: string };
    const ids = Array.from({ length: MAX_SESSIONS_PER_USER + 3 }, () => (web.signIn(carol.secret) as { id: string }).id);
    expect(web.countOf("carol")).toBe(MAX_SESSIONS_PER_USER);
    for (const id of ids.slice(0, 3)) expect(web.principal(id)).toBeUndefined();
    for (const id of ids.slice(3)) expect(web.principal(id)).toMatchObject({ tokenName: "carol", role: "viewer" });
    expect(web.principal(daves.id)).toMatchObject({ tokenName: "dave", role: "operator" });
  });

  it("drop every session of a revoked token at once", () => {
    const erin = tokens.create("erin", "user");
    for (let i = 0; i < 3; i++) web.signIn(erin.secret);
    const frank = tokens.create("frank", "user");
    const f = web.signIn(frank.secret) as { id: string };
    tokens.revoke("erin");
    expect(web.endSessionsOf("erin")).toBe(3);
    expect(web.countOf("erin")).toBe(0);
    expect(web.principal(f.id)).toMatchObject({ tokenName: "frank" });
  });

  it("give agent tokens nothing on the dashboard's own endpoints", () => {
    const lab2 = tokens.create("lab-2", "agent");
    expect(() => authenticateUser(tokens, new Headers({ authorization: `Bearer ${lab2.secret}` }), web)).toThrow(/agent tokens get nothing/);
    expect(authenticateRequest(tokens, new Headers({ authorization: `Bearer ${lab2.secret}` }), web)).toMatchObject({ kind: "agent" });
  });
});
