import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { drizzle } from "drizzle-orm/better-sqlite3";
import { migrate } from "drizzle-orm/better-sqlite3/migrator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toErrorReport } from "@farm/shared/errors";
import type { FarmDatabase } from "../db/database.js";
import { openDatabase } from "../db/open-database.js";
import * as schema from "../db/schema.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import { encodePageToken } from "../paging.js";
import { SqliteTokenRecordStore } from "./sqlite-token-record-store.js";
import { roleAtLeast, TokenStore } from "./token-store.js";
import { createTokenRecordStore } from "../db/stores.js";

const refused = (p: Promise<unknown>) => p.then(() => null, toErrorReport);

it("orders roles viewer < operator < admin", () => {
  expect(roleAtLeast("admin", "operator")).toBe(true);
  expect(roleAtLeast("operator", "operator")).toBe(true);
  expect(roleAtLeast("viewer", "operator")).toBe(false);
  expect(roleAtLeast(null, "viewer")).toBe(false);
});

describe.each(dialects)("tokens on %s", (dialect) => {
  let database: FarmDatabase;
  let store: TokenStore;
  beforeAll(async () => {
    database = await openTestDatabase(dialect);
    store = new TokenStore(createTokenRecordStore(database));
  });
  afterAll(() => database.close());

  describe("roles", () => {
    it("gives user tokens a role (operator by default) and agent tokens none", async () => {
      expect((await store.create("op", "user")).record).toMatchObject({ kind: "user", role: "operator", admin: false });
      expect((await store.create("boss", "user", "admin")).record).toMatchObject({ role: "admin", admin: true });
      const viewer = await store.create("eyes", "user", "viewer");
      expect(await store.authenticate(viewer.secret)).toEqual({ tokenName: "eyes", kind: "user", role: "viewer", admin: false });
      const agent = await store.create("host-1", "agent");
      expect(await store.authenticate(agent.secret)).toEqual({ tokenName: "host-1", kind: "agent", role: null, admin: false });
      expect(await refused(store.create("bad-agent", "agent", "admin"))).toMatchObject({ code: "INVALID_ARGUMENT", field: "role" });
      expect(await refused(store.create("bad-user", "user", null))).toMatchObject({ code: "INVALID_ARGUMENT", field: "role" });
      expect((await store.list()).map((t) => [t.name, t.role])).toEqual([
        ["boss", "admin"],
        ["eyes", "viewer"],
        ["host-1", null],
        ["op", "operator"],
      ]);
      expect(await store.count()).toBe(4);
    });
  });

  describe("create and revoke", () => {
    it("refuses a taken name, even when asked for it twice at once, and keeps the first secret", async () => {
      const first = await store.create("dup", "user");
      expect(await refused(store.create("dup", "agent"))).toMatchObject({ code: "ALREADY_EXISTS", field: "name" });
      const raced = await Promise.allSettled([store.create("race", "user"), store.create("race", "user"), store.create("race", "user")]);
      expect(raced.filter((r) => r.status === "fulfilled")).toHaveLength(1);
      expect(raced.filter((r) => r.status === "rejected").map((r) => toErrorReport((r as PromiseRejectedResult).reason).code)).toEqual(["ALREADY_EXISTS", "ALREADY_EXISTS"]);
      expect(await store.authenticate(first.secret)).toMatchObject({ tokenName: "dup", kind: "user" });
      expect(await store.authenticate("farmu_nope")).toBe("unknown");
      expect(await refused(store.create("-bad name", "user"))).toMatchObject({ code: "INVALID_ARGUMENT", field: "name" });
    });

    it("revokes once: a second revocation keeps the first time; an unknown name is NOT_FOUND", async () => {
      const t = await store.create("going", "user");
      const revoked = await store.revoke("going");
      expect(revoked.revokedAt).toEqual(expect.any(Number));
      expect(await store.authenticate(t.secret)).toBe("revoked");
      await new Promise((r) => setTimeout(r, 5));
      expect((await store.revoke("going")).revokedAt).toBe(revoked.revokedAt);
      expect((await store.get("going"))?.revokedAt).toBe(revoked.revokedAt);
      expect(await store.principalByName("going")).toBe("revoked");
      expect(await store.principalByName("nobody")).toBe("unknown");
      expect(await refused(store.revoke("nobody"))).toMatchObject({ code: "NOT_FOUND", field: "name" });
      expect(await store.get("nobody")).toBeUndefined();
    });
  });

  describe("agent token binding", () => {
    it("binds an agent token to the agent id of its first attach, and to no other", async () => {
      await store.create("lab-a", "agent");
      await store.create("lab-b", "agent");
      await store.bindAgent("lab-a", "agent-a");
      expect((await store.get("lab-a"))?.agentId).toBe("agent-a");
      // The same agent again (a reconnect): fine.
      await store.bindAgent("lab-a", "agent-a");
      // Another id with the bound token: refused.
      expect(await refused(store.bindAgent("lab-a", "agent-x"))).toMatchObject({ code: "AGENT_IDENTITY_MISMATCH", field: "agent_id" });
      // A bound agent's id with another (even unbound) token: refused, and that token stays unbound.
      expect(await refused(store.bindAgent("lab-b", "agent-a"))).toMatchObject({ code: "AGENT_IDENTITY_MISMATCH" });
      expect((await store.get("lab-b"))?.agentId).toBeNull();
      expect(await store.boundTo("agent-a")).toBe("lab-a");
      expect(await store.boundTo("agent-nobody")).toBeUndefined();
    });

    it("lets a replacement token take over once the bound token is revoked", async () => {
      await store.create("lab-c", "agent");
      await store.create("lab-c2", "agent");
      await store.bindAgent("lab-c", "agent-c");
      expect(await refused(store.bindAgent("lab-c2", "agent-c"))).toMatchObject({ code: "AGENT_IDENTITY_MISMATCH" });
      await store.revoke("lab-c");
      await store.bindAgent("lab-c2", "agent-c");
      expect((await store.get("lab-c2"))?.agentId).toBe("agent-c");
      expect(await store.boundTo("agent-c")).toBe("lab-c2");
    });

    it("never binds a user token, nor an unknown one", async () => {
      await store.create("person", "user");
      expect(await refused(store.bindAgent("person", "agent-p"))).toMatchObject({ code: "PERMISSION_DENIED" });
      expect(await refused(store.bindAgent("ghost", "agent-p"))).toMatchObject({ code: "PERMISSION_DENIED" });
    });

    it("lets exactly one of several racing attaches win: many tokens as one agent, one token as many agents", async () => {
      const names = ["race-1", "race-2", "race-3", "race-4"];
      for (const n of names) await store.create(n, "agent");
      const oneAgent = await Promise.allSettled(names.map((n) => store.bindAgent(n, "agent-contested")));
      expect(oneAgent.filter((r) => r.status === "fulfilled")).toHaveLength(1);
      const winners = (await Promise.all(names.map((n) => store.get(n)))).filter((t) => t?.agentId === "agent-contested");
      expect(winners).toHaveLength(1);
      await store.create("race-many", "agent");
      const ids = ["agent-m1", "agent-m2", "agent-m3", "agent-m4"];
      const manyAgents = await Promise.allSettled(ids.map((id) => store.bindAgent("race-many", id)));
      const won = manyAgents.findIndex((r) => r.status === "fulfilled");
      expect(manyAgents.filter((r) => r.status === "fulfilled")).toHaveLength(1);
      expect((await store.get("race-many"))?.agentId).toBe(ids[won]);
    });
  });

  describe("pages", () => {
    let pages: TokenStore;
    let other: FarmDatabase;
    const names = ["t05", "t01", "t09", "t03", "t07"];
    beforeAll(async () => {
      other = await openTestDatabase(dialect);
      pages = new TokenStore(createTokenRecordStore(other));
      for (const n of names) await pages.create(n, "user");
    });
    afterAll(() => other.close());

    const readAll = async (pageSize: number, between?: () => Promise<void>) => {
      const seen: string[] = [];
      let token = "";
      do {
        const p = await pages.listPage({ pageSize, pageToken: token });
        seen.push(...p.items.map((t) => t.name));
        token = p.nextPageToken;
        await between?.();
      } while (token);
      return seen;
    };

    it("pages by name, ending with an empty token", async () => {
      expect(await readAll(2)).toEqual(["t01", "t03", "t05", "t07", "t09"]);
      expect((await pages.listPage({ pageSize: 5, pageToken: "" })).nextPageToken).toBe("");
      expect((await pages.listPage({ pageSize: 4, pageToken: "" })).nextPageToken).not.toBe("");
    });

    it("neither repeats nor skips a token when others are created or revoked between reads", async () => {
      const added = ["t00", "t04", "t10"];
      let i = 0;
      const seen = await readAll(2, async () => {
        const n = added[i++];
        if (n) await pages.create(n, "agent");
        await pages.revoke("t05");
      });
      expect(new Set(seen).size).toBe(seen.length);
      // Every token that was there from the start, in order; new ones only past the reader's place.
      expect(seen.filter((n) => names.includes(n))).toEqual(["t01", "t03", "t05", "t07", "t09"]);
      expect(seen).not.toContain("t00");
    });

    it("refuses a malformed token or another list's", async () => {
      expect(await refused(pages.listPage({ pageSize: 2, pageToken: "zzzz" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
      expect(await refused(pages.listPage({ pageSize: 2, pageToken: encodePageToken({ list: "evidence" }, ["t03"]) }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
      expect(await refused(pages.listPage({ pageSize: -1, pageToken: "" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_size" });
    });
  });
});

describe("migration 0004 (token roles) on an existing database", () => {
  const dir = mkdtempSync(join(tmpdir(), "farm-token-migrate-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("keeps admin tokens admin and makes every other user token an operator", async () => {
    // The migrations as they were before roles: 0000..0003.
    const all = fileURLToPath(new URL("../../drizzle", import.meta.url));
    const before = join(dir, "before");
    cpSync(all, before, { recursive: true });
    const journal = JSON.parse(readFileSync(join(before, "meta", "_journal.json"), "utf8")) as { entries: { tag: string }[] };
    const cut = journal.entries.findIndex((e) => e.tag.startsWith("0004_"));
    expect(cut).toBe(4);
    writeFileSync(join(before, "meta", "_journal.json"), JSON.stringify({ ...journal, entries: journal.entries.slice(0, cut) }));
    const file = join(dir, "old.db");
    const sqlite = new Database(file);
    migrate(drizzle(sqlite, { schema }), { migrationsFolder: before });
    const insert = sqlite.prepare("INSERT INTO tokens (name, kind, admin, hash, created_at) VALUES (?, ?, ?, ?, 1)");
    insert.run("old-admin", "user", 1, "h1");
    insert.run("old-user", "user", 0, "h2");
    insert.run("old-agent", "agent", 0, "h3");
    sqlite.close();

    // The coordinator opens it with every migration.
    const upgraded = openDatabase(file);
    try {
      const rows = (await new TokenStore(new SqliteTokenRecordStore(upgraded.db)).list()).map((t) => [t.name, t.role, t.admin, t.agentId]);
      expect(rows).toEqual([
        ["old-admin", "admin", true, null],
        ["old-agent", null, false, null],
        ["old-user", "operator", false, null],
      ]);
      const raw = upgraded.sqlite.prepare("SELECT name, role FROM tokens ORDER BY name").all();
      expect(raw).toEqual([
        { name: "old-admin", role: "admin" },
        { name: "old-agent", role: null },
        { name: "old-user", role: "operator" },
      ]);
    } finally {
      upgraded.close();
    }
  });
});
