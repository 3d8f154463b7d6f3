import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import type { FarmDatabase } from "../db/database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import { DeviceLabels } from "./device-labels.js";
import { createDeviceLabelStore } from "../db/stores.js";

let opened: FarmDatabase | undefined;

afterEach(async () => {
  await opened?.close();
  opened = undefined;
});

function codeOf(err: unknown): string {
  return ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.code ?? "";
}

let dialect: (typeof dialects)[number] = "sqlite";

/** Labels on the current dialect's database; a second call reads the same database again (a restart). */
async function labels(): Promise<DeviceLabels> {
  opened ??= await openTestDatabase(dialect);
  return DeviceLabels.open(createDeviceLabelStore(opened));
}

describe.each(dialects)("DeviceLabels on %s", (d) => {
  beforeEach(() => {
    dialect = d;
  });

  it("keeps labels per physical device across a restart, and matches selectors against them", async () => {
    const first = await labels();
    expect(await first.set("pd-1", { rack: "b2", purpose: "ci" })).toEqual({ rack: "b2", purpose: "ci" });
    expect(await first.set("pd-1", { rack: "b3" })).toEqual({ rack: "b3", purpose: "ci" });
    await first.set("pd-2", { rack: "b3" });
    expect(await first.remove("pd-2", "rack")).toEqual({});

    const second = await labels();
    expect(second.of("pd-1")).toEqual({ rack: "b3", purpose: "ci" });
    expect(second.all()).toEqual([{ physicalId: "pd-1", labels: { rack: "b3", purpose: "ci" } }]);
    expect(second.matches("pd-1", { rack: "b3" })).toBe(true);
    expect(second.matches("pd-1", { rack: "b3", purpose: "dev" })).toBe(false);
    expect(second.matches("pd-2", { rack: "b3" })).toBe(false);
    expect(second.matches("pd-2", {})).toBe(true);
  });

  it("refuses a set with one bad pair, storing none of it", async () => {
    const l = await labels();
    await expect(l.set("pd-1", { good: "yes", "-bad": "x" })).rejects.toSatisfy((e) => codeOf(e) === "INVALID_ARGUMENT");
    await expect(l.set("pd-1", { good: "yes", note: "two\nlines" })).rejects.toSatisfy((e) => codeOf(e) === "INVALID_ARGUMENT");
    expect(l.of("pd-1")).toEqual({});
    expect(await createDeviceLabelStore(opened!).all()).toEqual([]);
  });

  it("tells every subscriber a device's labels after each change", async () => {
    const l = await labels();
    const a: unknown[] = [];
    const b: unknown[] = [];
    l.events.on("changed", (physicalId, now) => a.push([physicalId, now]));
    l.events.on("changed", (physicalId, now) => b.push([physicalId, now]));
    await l.set("pd-1", { rack: "b2" });
    await l.remove("pd-1", "rack");
    const expected = [["pd-1", { rack: "b2" }], ["pd-1", {}]];
    expect(a).toEqual(expected);
    expect(b).toEqual(expected);
  });
});

describe("DeviceLabels: paged listing", () => {
  /** Every page's physical ids, running `between` after each page but the last. */
  async function readAll(l: DeviceLabels, pageSize: number, between: (page: number) => Promise<void> = async () => undefined): Promise<string[]> {
    const out: string[] = [];
    let pageToken = "";
    for (let page = 0; page < 100; page++) {
      const res = l.listPage({ pageSize, pageToken });
      out.push(...res.items.map((d) => d.physicalId));
      if (!res.nextPageToken) return out;
      pageToken = res.nextPageToken;
      await between(page);
    }
    throw new Error("paging does not end");
  }

  it("pages labelled devices by physical id, skipping devices whose labels were all removed", async () => {
    const l = await labels();
    for (const id of ["pd-4", "pd-2", "pd-5", "pd-1", "pd-3"]) await l.set(id, { rack: id });
    await l.remove("pd-3", "rack");
    expect(await readAll(l, 2)).toEqual(["pd-1", "pd-2", "pd-4", "pd-5"]);
    expect(l.listPage({ pageSize: 1, pageToken: "" }).items).toEqual([{ physicalId: "pd-1", labels: { rack: "pd-1" } }]);
    expect(l.listPage({ pageSize: 4, pageToken: "" }).nextPageToken).toBe("");
  });

  it("neither repeats nor misses a device labelled or unlabelled between pages", async () => {
    const l = await labels();
    for (const id of ["pd-2", "pd-4", "pd-6", "pd-8"]) await l.set(id, { rack: "x" });
    const ids = await readAll(l, 2, async (page) => {
      if (page !== 0) return;
      // Behind the cursor (pd-4), the cursor itself, and ahead of it.
      await l.set("pd-1", { rack: "x" });
      await l.remove("pd-4", "rack");
      await l.set("pd-5", { rack: "x" });
    });
    expect(ids).toEqual(["pd-2", "pd-4", "pd-5", "pd-6", "pd-8"]);
  });

  it("refuses a negative page size and a malformed token", async () => {
    const l = await labels();
    expect(() => l.listPage({ pageSize: -1, pageToken: "" })).toThrow(expect.toSatisfy((e) => codeOf(e) === "INVALID_ARGUMENT"));
    expect(() => l.listPage({ pageSize: 1, pageToken: "!!" })).toThrow(expect.toSatisfy((e) => codeOf(e) === "INVALID_ARGUMENT"));
  });
});
