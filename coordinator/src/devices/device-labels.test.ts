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
