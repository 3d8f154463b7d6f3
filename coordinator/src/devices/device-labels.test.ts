import { afterEach, describe, expect, it } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import { deviceLabels } from "../db/schema.js";
import { DeviceLabels } from "./device-labels.js";
import { SqliteDeviceLabelStore } from "./sqlite-device-label-store.js";

let opened: OpenedDatabase | undefined;

afterEach(() => {
  opened?.close();
  opened = undefined;
});

function codeOf(err: unknown): string {
  return ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.code ?? "";
}

function labels(): DeviceLabels {
  opened ??= openDatabase(":memory:");
  return new DeviceLabels(new SqliteDeviceLabelStore(opened.db));
}

describe("DeviceLabels", () => {
  it("keeps labels per physical device across a restart, and matches selectors against them", () => {
    const first = labels();
    expect(first.set("pd-1", { rack: "b2", purpose: "ci" })).toEqual({ rack: "b2", purpose: "ci" });
    expect(first.set("pd-1", { rack: "b3" })).toEqual({ rack: "b3", purpose: "ci" });
    first.set("pd-2", { rack: "b3" });
    expect(first.remove("pd-2", "rack")).toEqual({});

    const second = labels();
    expect(second.of("pd-1")).toEqual({ rack: "b3", purpose: "ci" });
    expect(second.all()).toEqual([{ physicalId: "pd-1", labels: { rack: "b3", purpose: "ci" } }]);
    expect(second.matches("pd-1", { rack: "b3" })).toBe(true);
    expect(second.matches("pd-1", { rack: "b3", purpose: "dev" })).toBe(false);
    expect(second.matches("pd-2", { rack: "b3" })).toBe(false);
    expect(second.matches("pd-2", {})).toBe(true);
  });

  it("refuses a set with one bad pair, storing none of it", () => {
    const l = labels();
    expect(() => l.set("pd-1", { good: "yes", "-bad": "x" })).toThrow(expect.toSatisfy((e) => codeOf(e) === "INVALID_ARGUMENT"));
    expect(() => l.set("pd-1", { good: "yes", note: "two\nlines" })).toThrow(expect.toSatisfy((e) => codeOf(e) === "INVALID_ARGUMENT"));
    expect(l.of("pd-1")).toEqual({});
    expect(opened?.db.select().from(deviceLabels).all()).toEqual([]);
  });

  it("tells every subscriber a device's labels after each change", () => {
    const l = labels();
    const a: unknown[] = [];
    const b: unknown[] = [];
    l.events.on("changed", (physicalId, now) => a.push([physicalId, now]));
    l.events.on("changed", (physicalId, now) => b.push([physicalId, now]));
    l.set("pd-1", { rack: "b2" });
    l.remove("pd-1", "rack");
    const expected = [["pd-1", { rack: "b2" }], ["pd-1", {}]];
    expect(a).toEqual(expected);
    expect(b).toEqual(expected);
  });
});

describe("DeviceLabels: paged listing", () => {
  /** Every page's physical ids, running `between` after each page but the last. */
  function readAll(l: DeviceLabels, pageSize: number, between: (page: number) => void = () => undefined): string[] {
    const out: string[] = [];
    let pageToken = "";
    for (let page = 0; page < 100; page++) {
      const res = l.listPage({ pageSize, pageToken });
      out.push(...res.items.map((d) => d.physicalId));
      if (!res.nextPageToken) return out;
      pageToken = res.nextPageToken;
      between(page);
    }
    throw new Error("paging does not end");
  }

  it("pages labelled devices by physical id, skipping devices whose labels were all removed", () => {
    const l = labels();
    for (const id of ["pd-4", "pd-2", "pd-5", "pd-1", "pd-3"]) l.set(id, { rack: id });
    l.remove("pd-3", "rack");
    expect(readAll(l, 2)).toEqual(["pd-1", "pd-2", "pd-4", "pd-5"]);
    expect(l.listPage({ pageSize: 1, pageToken: "" }).items).toEqual([{ physicalId: "pd-1", labels: { rack: "pd-1" } }]);
    expect(l.listPage({ pageSize: 4, pageToken: "" }).nextPageToken).toBe("");
  });

  it("neither repeats nor misses a device labelled or unlabelled between pages", () => {
    const l = labels();
    for (const id of ["pd-2", "pd-4", "pd-6", "pd-8"]) l.set(id, { rack: "x" });
    const ids = readAll(l, 2, (page) => {
      if (page !== 0) return;
      // Behind the cursor (pd-4), the cursor itself, and ahead of it.
      l.set("pd-1", { rack: "x" });
      l.remove("pd-4", "rack");
      l.set("pd-5", { rack: "x" });
    });
    expect(ids).toEqual(["pd-2", "pd-4", "pd-5", "pd-6", "pd-8"]);
  });

  it("refuses a negative page size and a malformed token", () => {
    const l = labels();
    expect(() => l.listPage({ pageSize: -1, pageToken: "" })).toThrow(expect.toSatisfy((e) => codeOf(e) === "INVALID_ARGUMENT"));
    expect(() => l.listPage({ pageSize: 1, pageToken: "!!" })).toThrow(expect.toSatisfy((e) => codeOf(e) === "INVALID_ARGUMENT"));
  });
});
