import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { drizzle } from "drizzle-orm/better-sqlite3";
import { migrate } from "drizzle-orm/better-sqlite3/migrator";
import { afterAll, describe, expect, it } from "vitest";
import { openDatabase } from "../db/open-database.js";
import * as schema from "../db/schema.js";
import { encodePageToken } from "../paging.js";
import { roleAtLeast, TokenStore } from "./token-store.js";
import { refusal } from "@farm/shared/testing/refusal";

const opened = openDatabase(":memory:");
const store = new TokenStore(opened.db);
afterAll(() => opened.close());

describe("token roles", () => {
  it("gives user tokens a role (operator by default) and agent tokens none", () => {
    expect(store.create("op", "user").record).toMatchObject({ kind: "user", role: "operator", admin: false });
    expect(store.create("boss", "user", "admin").record).toMatchObject({ role: "admin", admin: true });
    const viewer = store.create("eyes", "user", "viewer");
    expect(store.authenticate(viewer.secret)).toEqual({ tokenName: "eyes", kind: "user", role: "viewer", admin: false });
    const agent = store.create("host-1", "agent");
    expect(store.authenticate(agent.secret)).toEqual({ tokenName: "host-1", kind: "agent", role: null, admin: false });
    expect(refusal(() => store.create("bad-agent", "agent", "admin"))).toMatchObject({ code: "INVALID_ARGUMENT", field: "role" });
    expect(refusal(() => store.create("bad-user", "user", null))).toMatchObject({ code: "INVALID_ARGUMENT", field: "role" });
    expect(store.list().map((t) => [t.name, t.role])).toEqual([
      ["boss", "admin"],
      ["eyes", "viewer"],
      ["host-1", null],
      ["op", "operator"],
    ]);
  });

  it("orders roles viewer < operator < admin", () => {
    expect(roleAtLeast("admin", "operator")).toBe(true);
    expect(roleAtLeast("operator", "operator")).toBe(true);
    expect(roleAtLeast("viewer", "operator")).toBe(false);
    expect(roleAtLeast(null, "viewer")).toBe(false);
  });
});

describe("agent token binding", () => {
  it("binds an agent token to the agent id of its first attach, and to no other", () => {
    store.create("lab-a", "agent");
    store.create("lab-b", "agent");
    store.bindAgent("lab-a", "agent-a");
    expect(store.get("lab-a")?.agentId).toBe("agent-a");
    // The same agent again (a reconnect): fine.
    store.bindAgent("lab-a", "agent-a");
    // Another id with the bound token: refused.
    expect(refusal(() => store.bindAgent("lab-a", "agent-x"))).toMatchObject({ code: "AGENT_IDENTITY_MISMATCH", field: "agent_id" });
    // A bound agent's id with another (even unbound) token: refused, and that token stays unbound.
    expect(refusal(() => store.bindAgent("lab-b", "agent-a"))).toMatchObject({ code: "AGENT_IDENTITY_MISMATCH" });
    expect(store.get("lab-b")?.agentId).toBeNull();
    expect(store.boundTo("agent-a")).toBe("lab-a");
  });

  it("lets a replacement token take over once the bound token is revoked", () => {
    store.create("lab-c", "agent");
    store.create("lab-c2", "agent");
    store.bindAgent("lab-c", "agent-c");
    expect(refusal(() => store.bindAgent("lab-c2", "agent-c"))).toMatchObject({ code: "AGENT_IDENTITY_MISMATCH" });
    store.revoke("lab-c");
    store.bindAgent("lab-c2", "agent-c");
    expect(store.get("lab-c2")?.agentId).toBe("agent-c");
    expect(store.boundTo("agent-c")).toBe("lab-c2");
  });

  it("never binds a user token", () => {
    store.create("person", "user");
    expect(refusal(() => store.bindAgent("person", "agent-p"))).toMatchObject({ code: "PERMISSION_DENIED" });
  });
});

describe("migration 0004 (token roles) on an existing database", () => {
  const dir = mkdtempSync(join(tmpdir(), "farm-token-migrate-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("keeps admin tokens admin and makes every other user token an operator", () => {
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
      const rows = new TokenStore(upgraded.db).list().map((t) => [t.name, t.role, t.admin, t.agentId]);
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

describe("token pages", () => {
  const db = openDatabase(":memory:");
  const tokens = new TokenStore(db.db);
  afterAll(() => db.close());
  const names = ["t05", "t01", "t09", "t03", "t07"];
  for (const n of names) tokens.create(n, "user");

  const readAll = (pageSize: number, between?: () => void) => {
    const seen: string[] = [];
    let token = "";
    do {
      const p = tokens.listPage({ pageSize, pageToken: token });
      seen.push(...p.items.map((t) => t.name));
      token = p.nextPageToken;
      between?.();
    } while (token);
    return seen;
  };

  it("pages by name, ending with an empty token", () => {
    expect(readAll(2)).toEqual(["t01", "t03", "t05", "t07", "t09"]);
    expect(tokens.listPage({ pageSize: 5, pageToken: "" }).nextPageToken).toBe("");
    expect(tokens.listPage({ pageSize: 4, pageToken: "" }).nextPageToken).not.toBe("");
  });

  it("neither repeats nor skips a token when others are created or revoked between reads", () => {
    const added = ["t00", "t04", "t10"];
    let i = 0;
    const seen = readAll(2, () => {
      const n = added[i++];
      if (n) tokens.create(n, "agent");
      tokens.revoke("t05");
    });
    expect(new Set(seen).size).toBe(seen.length);
    // Every token that was there from the start, in order; new ones only past the reader's place.
    expect(seen.filter((n) => names.includes(n))).toEqual(["t01", "t03", "t05", "t07", "t09"]);
    expect(seen).not.toContain("t00");
  });

  it("refuses a malformed token or another list's", () => {
    expect(refusal(() => tokens.listPage({ pageSize: 2, pageToken: "zzzz" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(refusal(() => tokens.listPage({ pageSize: 2, pageToken: encodePageToken({ list: "evidence" }, ["t03"]) }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(refusal(() => tokens.listPage({ pageSize: -1, pageToken: "" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_size" });
  });
});
