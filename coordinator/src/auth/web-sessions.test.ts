import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toErrorReport } from "@farm/shared/errors";
import { authenticateNodeHeaders, authenticateRequest, authenticateUser } from "./auth.js";
import type { FarmDatabase } from "../db/database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import { hashToken, TokenStore } from "./token-store.js";
import { type WebSessionStore } from "./web-session-store.js";
import { MAX_SESSIONS_PER_USER, SESSION_TTL_MS, sessionIdFromCookie, WebSessions } from "./web-sessions.js";
import { createTokenRecordStore, createWebSessionStore } from "../db/stores.js";

const refused = (p: Promise<unknown>) => p.then(() => null, toErrorReport);
const signedIn = async (p: Promise<{ id: string } | { error: string }>) => {
  const r = await p;
  if ("error" in r) throw new Error(r.error);
  return r;
};

it("reads the session id from a Cookie header", () => {
  expect(sessionIdFromCookie("a=b; farm_session=xyz=; c=d")).toBe("xyz=");
  expect(sessionIdFromCookie(undefined)).toBeUndefined();
});

describe.each(dialects)("dashboard sessions on %s", (dialect) => {
  let database: FarmDatabase;
  let tokens: TokenStore;
  let store: WebSessionStore;
  let web: WebSessions;
  let user: { secret: string };
  let agent: { secret: string };
  beforeAll(async () => {
    database = await openTestDatabase(dialect);
    tokens = new TokenStore(createTokenRecordStore(database));
    store = createWebSessionStore(database);
    web = new WebSessions(tokens, store);
    user = await tokens.create("alice", "user");
    agent = await tokens.create("lab", "agent");
  });
  afterAll(() => database.close());

  it("exchange a user token for a random session id, stored only as its hash; agent and unknown tokens are refused", async () => {
    const s = await signedIn(web.signIn(user.secret));
    expect(s.id).not.toContain(user.secret);
    expect(s.id.length).toBeGreaterThanOrEqual(40);
    expect(await web.principal(s.id)).toMatchObject({ tokenName: "alice", kind: "user" });
    expect(await store.get(s.id)).toBeUndefined();
    expect(await store.get(hashToken(s.id))).toMatchObject({ tokenName: "alice" });
    expect(await web.signIn(agent.secret)).toMatchObject({ error: expect.stringContaining("agent tokens") });
    expect(await web.signIn("farmu_nope")).toEqual({ error: "unknown token" });
  });

  it("are known to every coordinator of the database, and survive a restart", async () => {
    const s = await signedIn(web.signIn(user.secret));
    const replica = new WebSessions(new TokenStore(createTokenRecordStore(database)), createWebSessionStore(database));
    expect(await replica.principal(s.id)).toMatchObject({ tokenName: "alice" });
    await replica.signOut(s.id);
    expect(await web.principal(s.id)).toBeUndefined();
  });

  it("end with sign-out, expiry (the expired row swept), and the token's revocation", async () => {
    const a = await signedIn(web.signIn(user.secret));
    await web.signOut(a.id);
    expect(await web.principal(a.id)).toBeUndefined();
    const b = await signedIn(web.signIn(user.secret));
    expect(await web.principal(b.id, Date.now() + SESSION_TTL_MS + 1)).toBeUndefined();
    expect(await store.get(hashToken(b.id))).toBeUndefined();
    const c = await signedIn(web.signIn(user.secret));
    await tokens.revoke("alice");
    expect(await web.principal(c.id)).toBeUndefined();
    expect(await web.signIn(user.secret)).toEqual({ error: "token has been revoked" });
  });

  it("sweep expired sessions at the next sign-in", async () => {
    const gina = await tokens.create("gina", "user");
    const old = await signedIn(web.signIn(gina.secret, Date.now() - SESSION_TTL_MS - 10));
    expect(await store.get(hashToken(old.id))).toBeDefined();
    await signedIn(web.signIn(gina.secret));
    expect(await store.get(hashToken(old.id))).toBeUndefined();
    expect(await web.countOf("gina")).toBe(1);
  });

  it("authenticate requests by cookie, refusing other sites", async () => {
    const bob = await tokens.create("bob", "user", "admin");
    const s = await signedIn(web.signIn(bob.secret));
    const headers = (h: Record<string, string>) => new Headers(h);
    expect(await authenticateRequest(tokens, headers({ cookie: `x=1; farm_session=${s.id}`, host: "farm:7420", origin: "http://farm:7420" }), web)).toMatchObject({ tokenName: "bob", admin: true });
    expect(await refused(authenticateRequest(tokens, headers({ cookie: `farm_session=${s.id}`, host: "farm:7420", origin: "http://evil.example" }), web))).toMatchObject({ message: expect.stringMatching(/cross-site/) });
    expect(await refused(authenticateRequest(tokens, headers({ cookie: "farm_session=forged", host: "farm:7420" }), web))).toMatchObject({ code: "UNAUTHENTICATED", message: expect.stringMatching(/sign in again/) });
    // Without a dashboard, a cookie is no credential at all.
    expect(await refused(authenticateRequest(tokens, headers({ cookie: `farm_session=${s.id}` })))).toMatchObject({ message: expect.stringMatching(/bearer/) });
  });

  it("cap each user's live sessions, evicting that user's oldest, never another user's", async () => {
    const carol = await tokens.create("carol", "user", "viewer");
    const dave = await tokens.create("dave", "user");
    const daves = await signedIn(web.signIn(dave.secret));
    // One sign-in per millisecond: sign-ins within one millisecond are evicted in no set order.
    const t0 = Date.now();
    const ids: string[] = [];
    for (let i = 0; i < MAX_SESSIONS_PER_USER + 3; i++) ids.push((await signedIn(web.signIn(carol.secret, t0 + i))).id);
    expect(await web.countOf("carol")).toBe(MAX_SESSIONS_PER_USER);
    for (const id of ids.slice(0, 3)) expect(await web.principal(id)).toBeUndefined();
    for (const id of ids.slice(3)) expect(await web.principal(id)).toMatchObject({ tokenName: "carol", role: "viewer" });
    expect(await web.principal(daves.id)).toMatchObject({ tokenName: "dave", role: "operator" });
  });

  it("hold the cap when one user signs in many times at once", async () => {
    const hal = await tokens.create("hal", "user");
    const all = await Promise.all(Array.from({ length: MAX_SESSIONS_PER_USER * 2 }, () => signedIn(web.signIn(hal.secret))));
    expect(all).toHaveLength(MAX_SESSIONS_PER_USER * 2);
    expect(await web.countOf("hal")).toBe(MAX_SESSIONS_PER_USER);
  });

  it("drop every session of a revoked token at once", async () => {
    const erin = await tokens.create("erin", "user");
    for (let i = 0; i < 3; i++) await signedIn(web.signIn(erin.secret));
    const frank = await tokens.create("frank", "user");
    const f = await signedIn(web.signIn(frank.secret));
    await tokens.revoke("erin");
    expect(await web.endSessionsOf("erin")).toBe(3);
    expect(await web.countOf("erin")).toBe(0);
    expect(await web.principal(f.id)).toMatchObject({ tokenName: "frank" });
  });

  it("give agent tokens nothing on the dashboard's own endpoints", async () => {
    const lab2 = await tokens.create("lab-2", "agent");
    expect(await refused(authenticateUser(tokens, new Headers({ authorization: `Bearer ${lab2.secret}` }), web))).toMatchObject({ message: expect.stringMatching(/agent tokens get nothing/) });
    expect(await authenticateRequest(tokens, new Headers({ authorization: `Bearer ${lab2.secret}` }), web)).toMatchObject({ kind: "agent" });
  });

  it("are checked the same from a Node request's headers as from fetch Headers (the request gate's way), whatever the credentials", async () => {
    const ivy = await tokens.create("ivy", "user");
    const gone = await tokens.create("gone", "user");
    await tokens.revoke("gone");
    const s = await signedIn(web.signIn(ivy.secret));
    const verified: string[] = [];
    const replicas = { verify: (bearer: string) => (verified.push(bearer), Promise.resolve(bearer === "farmr_good" ? "r2" : undefined)) };
    const cases: Record<string, string | string[]>[] = [
      { authorization: `Bearer ${ivy.secret}` },
      { authorization: `bearer  ${ivy.secret}` },
      { authorization: `Bearer ${gone.secret}` },
      { authorization: "Bearer farmu_unknown" },
      { authorization: `Basic ${ivy.secret}` },
      { authorization: "" },
      {},
      { authorization: "Bearer farmr_good" },
      { authorization: "Bearer farmr_bad" },
      { cookie: `farm_session=${s.id}`, host: "farm:7420", origin: "http://farm:7420" },
      { cookie: `farm_session=${s.id}`, host: "farm:7420", origin: "http://evil.example" },
      { authorization: `Bearer ${ivy.secret}`, cookie: "farm_session=forged" },
      { cookie: ["farm_session=forged", `farm_session=${s.id}`] },
    ];
    const fetchHeaders = (node: Record<string, string | string[]>) => {
      const h = new Headers();
      for (const [k, v] of Object.entries(node)) h.set(k, Array.isArray(v) ? v.join(", ") : v);
      return h;
    };
    const outcome = (p: Promise<unknown>) => p.then((principal) => ({ principal }), (err: unknown) => ({ refused: toErrorReport(err) }));
    for (const node of cases) {
      for (const reps of [undefined, replicas]) {
        const expected = await outcome(authenticateRequest(tokens, fetchHeaders(node), web, reps));
        expect(await outcome(authenticateNodeHeaders(tokens, node, () => fetchHeaders(node), web, reps)), JSON.stringify(node)).toEqual(expected);
      }
    }
    // Both ways asked the replicas about each replica credential, and nothing else.
    expect(verified).toEqual(["farmr_good", "farmr_good", "farmr_bad", "farmr_bad"]);
  });
});
