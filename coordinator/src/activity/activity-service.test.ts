import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { toErrorReport } from "@farm/shared/errors";
import { ActivityService } from "@farm/shared/gen/farm/v1/activity_service_pb";
import { ActivityLog } from "./activity-log.js";
import { registerActivityService } from "./activity-service.js";
import { principalKey } from "../auth/auth.js";
import type { Principal } from "../auth/token-store.js";
import { sqliteDatabase } from "../db/database.js";
import { FileSummaryKeyStore, SummaryKey } from "../auth/summary-key.js";
import { createActivityStore } from "../db/stores.js";

const database = sqliteDatabase(":memory:");
const log = new ActivityLog(createActivityStore(database));
const keyDir = await mkdtemp(join(tmpdir(), "activity-service-"));
const summaries = await SummaryKey.open(new FileSummaryKeyStore(keyDir));
afterAll(async () => {
  await database.close();
  await rm(keyDir, { recursive: true, force: true });
});
for (let i = 0; i < 1205; i++) {
  await log.record({ at: 1_700_000_000_000 + i, caller: "alice", leaseId: "", serial: i % 5 === 0 ? "s5" : "s1", physicalId: "", agentId: "a1", command: `c${i}`, outcome: "ok", durationMs: 1, requestId: "", detail: "" });
}

/** Who calls, by the test's header: the caller of the entries below, another operator, an admin. */
const viewers: Record<string, Principal> = {
  carol: { tokenName: "carol", kind: "user", role: "operator", admin: false },
  dave: { tokenName: "dave", kind: "user", role: "viewer", admin: false },
  root: { tokenName: "root", kind: "user", role: "admin", admin: true },
};
const as = (viewer: string) => ({ headers: { "x-test-viewer": viewer } });

const client = createClient(
  ActivityService,
  createRouterTransport((router) => registerActivityService(router, { activity: log, summaries }), {
    router: {
      interceptors: [
        (next) => (req) => {
          req.contextValues.set(principalKey, viewers[req.header.get("x-test-viewer") ?? ""] ?? { tokenName: "alice", kind: "user", role: "admin", admin: true });
          return next(req);
        },
      ],
    },
  }),
);

describe("ListActivity over the wire", () => {
  it("serves 100 by default and 1000 at most, each with a token for the rest", async () => {
    const first = await client.listActivity({});
    expect(first.entries).toHaveLength(100);
    expect(first.entries[0]?.command).toBe("c1204");
    const big = await client.listActivity({ pageSize: 5000 });
    expect(big.entries).toHaveLength(1000);
    const rest = await client.listActivity({ pageSize: 5000, pageToken: big.nextPageToken });
    expect(rest.entries.map((e) => e.command)).toEqual(Array.from({ length: 205 }, (_, i) => `c${204 - i}`));
    expect(rest.nextPageToken).toBe("");
  });

  it("still reads the deprecated limit as the page size when page_size is 0", async () => {
    // What clients from before paging send.
    expect((await client.listActivity({ limit: 7 })).entries).toHaveLength(7);
    expect((await client.listActivity({ limit: 7, pageSize: 3 })).entries).toHaveLength(3);
    const old = await client.listActivity({ limit: 200, serial: "s5" });
    expect(old.entries).toHaveLength(200);
    expect(old.entries.every((e) => e.serial === "s5")).toBe(true);
    const next = await client.listActivity({ serial: "s5", pageSize: 1000, pageToken: old.nextPageToken });
    expect(next.entries).toHaveLength(41);
    expect(new Set([...old.entries, ...next.entries].map((e) => e.id)).size).toBe(241);
  });

  it("refuses a negative page_size, a token for other filters, and a malformed token, naming the field", async () => {
    const page = await client.listActivity({ serial: "s5", pageSize: 10 });
    const report = (p: Promise<unknown>) => p.then(() => null, toErrorReport);
    expect(await report(client.listActivity({ pageSize: -1 }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_size" });
    expect(await report(client.listActivity({ serial: "s1", pageToken: page.nextPageToken }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(await report(client.listActivity({ serial: "s5", since: { seconds: 1n, nanos: 0 }, pageToken: page.nextPageToken }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(await report(client.listActivity({ pageToken: "definitely-not" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
  });

  it("shows typed text, keys that type and shell commands only to their caller and admins; others see the kind, length and keyed hash", async () => {
    const entry = { at: 1_800_000_000_000, caller: "carol", leaseId: "", serial: "s-typed", physicalId: "", agentId: "a1", outcome: "ok", durationMs: 1, requestId: "" };
    await log.record({ ...entry, command: "sendInput", detail: "text MyP4ssw0rd" });
    await log.record({ ...entry, command: "sendInput", detail: "key KEYCODE_4" });
    await log.record({ ...entry, command: "sendInput", detail: "key KEYCODE_HOME" });
    await log.record({ ...entry, command: "sendInput", detail: "tap 10,20" });
    await log.record({ ...entry, command: "runShell", detail: "echo 1234" });
    const details = async (viewer: string) => (await client.listActivity({ serial: "s-typed" }, as(viewer))).entries.map((e) => e.detail).reverse();
    const clear = ["text MyP4ssw0rd", "key KEYCODE_4", "key KEYCODE_HOME", "tap 10,20", "echo 1234"];
    expect(await details("carol")).toEqual(clear);
    expect(await details("root")).toEqual(clear);
    const redacted = [`text [10 chars, hmac:${summaries.summarize("MyP4ssw0rd")}]`, `key [9 chars, hmac:${summaries.summarize("KEYCODE_4")}]`, "key KEYCODE_HOME", "tap 10,20", `echo [hmac:${summaries.summarize("echo 1234")}]`];
    expect(await details("dave")).toEqual(redacted);
  });
});
