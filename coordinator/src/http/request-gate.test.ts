import { createServer, request, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "@farm/shared/log";
import { sqliteDatabase } from "../db/database.js";
import { type TokenRecordStore } from "../auth/token-record-store.js";
import { AUTH_CACHE_MS, TokenStore } from "../auth/token-store.js";
import { requestGate } from "./request-gate.js";
import { createTokenRecordStore } from "../db/stores.js";

const database = sqliteDatabase(":memory:");
const records = createTokenRecordStore(database);
// Looking a token up takes as long as the test says: a slow database.
let lookupDelayMs = 0;
const slow: TokenRecordStore = Object.assign(Object.create(records) as TokenRecordStore, {
  byHash: async (hash: string) => (await new Promise((r) => setTimeout(r, lookupDelayMs)), records.byHash(hash)),
});
// A clock that jumps past the token cache at every look: each call asks the (slow) database.
let clock = 0;
const tokens = new TokenStore(slow, () => (clock += AUTH_CACHE_MS + 1));
let secret = "";
let server: Server;
let port = 0;
const held: ServerResponse[] = [];
let bodiesRead = 0;

beforeAll(async () => {
  secret = (await tokens.create("ci", "user")).secret;
  const gated = requestGate(
    (req, res) => {
      req.on("data", () => undefined);
      req.once("end", () => {
        bodiesRead++;
        // "/x.Hold/Call" stays open until the test ends it.
        if (req.url === "/x.Hold/Call") held.push(res as ServerResponse);
        else res.end("ok");
      });
    },
    { tokens, insecure: false, isOpen: () => false, maxStreamsPerPrincipal: 1, log: createLogger({ write: () => undefined }) },
  );
  server = createServer(gated);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  port = (server.address() as AddressInfo).port;
});
afterAll(async () => {
  for (const r of held) r.end();
  await new Promise((r) => server.close(r));
  await database.close();
});

function call(path: string, token: string | undefined, opts: { abortAfterMs?: number } = {}): Promise<{ status: number; body: string } | "aborted"> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, method: "POST", headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) } }, (res) => {
      let body = "";
      res.on("data", (c: Buffer) => (body += c.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", (err) => (opts.abortAfterMs !== undefined ? resolve("aborted") : reject(err)));
    req.end("{}");
    if (opts.abortAfterMs !== undefined) setTimeout(() => req.destroy(), opts.abortAfterMs);
  });
}

describe("the request gate", () => {
  it("refuses an RPC without valid credentials from its headers, never reading its body", async () => {
    expect(await call("/x.Svc/Call", undefined)).toMatchObject({ status: 401 });
    expect(await call("/x.Svc/Call", "farmu_nope")).toMatchObject({ status: 401, body: expect.stringContaining("unknown token") });
    expect(bodiesRead).toBe(0);
    expect(await call("/x.Svc/Call", secret)).toEqual({ status: 200, body: "ok" });
    expect(bodiesRead).toBe(1);
  });

  it("refuses a plain body over 64 KiB from its Content-Length, except on the dashboard's upload path, which takes a blob-sized one", async () => {
    const announce = (path: string, length: number) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request({ host: "127.0.0.1", port, path, method: "POST", headers: { "content-length": String(length) } }, (res) => {
          let body = "";
          res.on("data", (c: Buffer) => (body += c.toString()));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        });
        req.on("error", reject);
        // The body that follows: all of it for a small one; none for a large one (the gate answers from the headers).
        if (length <= 1024 * 1024) req.end(Buffer.alloc(length, 1));
        else req.flushHeaders();
      });
    const before = bodiesRead;
    expect(await announce("/dashboard/api/sign-in", 65 * 1024)).toMatchObject({ status: 413, body: expect.stringContaining("MESSAGE_TOO_LARGE") });
    expect(await announce("/dashboard/api/blobs", 3 * 1024 ** 3)).toMatchObject({ status: 413, body: expect.stringContaining("\"field\":\"content-length\"") });
    expect(bodiesRead).toBe(before);
    expect(await announce("/dashboard/api/blobs", 300 * 1024)).toEqual({ status: 200, body: "ok" });
  });

  it("counts a call in flight only once admitted: a caller gone while its token was looked up holds no place", async () => {
    lookupDelayMs = 150;
    expect(await call("/x.Svc/Call", secret, { abortAfterMs: 30 })).toBe("aborted");
    await new Promise((r) => setTimeout(r, 250));
    lookupDelayMs = 0;
    const first = call("/x.Hold/Call", secret);
    await expect.poll(() => held.length).toBe(1);
    // One call per token here: the second waits for none, it is refused.
    expect(await call("/x.Svc/Call", secret)).toMatchObject({ body: expect.stringContaining("TOO_MANY_STREAMS") });
    held.shift()?.end("done");
    expect(await first).toEqual({ status: 200, body: "done" });
    expect(await call("/x.Svc/Call", secret)).toEqual({ status: 200, body: "ok" });
  });
});
