import { afterAll, describe, expect, it } from "vitest";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { toErrorReport } from "@farm/shared/errors";
import { ActivityService } from "@farm/shared/gen/farm/v1/activity_service_pb";
import { ActivityLog } from "./activity-log.js";
import { registerActivityService } from "./activity-service.js";
import { principalKey } from "../auth/auth.js";
import { sqliteDatabase } from "../db/database.js";
import { createActivityStore } from "./activity-store.js";

const database = sqliteDatabase(":memory:");
const log = new ActivityLog(createActivityStore(database));
afterAll(() => database.close());
for (let i = 0; i < 1205; i++) {
  await log.record({ at: 1_700_000_000_000 + i, caller: "alice", leaseId: "", serial: i % 5 === 0 ? "s5" : "s1", physicalId: "", agentId: "a1", command: `c${i}`, outcome: "ok", durationMs: 1, requestId: "", detail: "" });
}

const client = createClient(
  ActivityService,
  createRouterTransport((router) => registerActivityService(router, { activity: log }), {
    router: {
      interceptors: [
        (next) => (req) => {
          req.contextValues.set(principalKey, { tokenName: "alice", kind: "user", role: "admin", admin: true });
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
});
