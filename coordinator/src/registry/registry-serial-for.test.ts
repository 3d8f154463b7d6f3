import { afterEach, describe, expect, it } from "vitest";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import { Registry } from "./registry.js";
import { SqliteRegistryStore } from "./sqlite-registry-store.js";
import { failure, phoneReport as report, testHello as hello, testSession as session } from "./testing/registry-fixtures.js";

let opened: OpenedDatabase | undefined;

afterEach(() => {
  opened?.close();
  opened = undefined;
});

/** lab-a: one phone on two serials (USB and TCP), another on one; lab-b claims the second phone's id, unaccepted. */
async function farm(): Promise<Registry> {
  opened ??= openDatabase(":memory:");
  const r = await Registry.open(new SqliteRegistryStore(opened.db), { heartbeatMisses: 3 });
  await r.attach(hello("a", "lab-a"), session());
  await r.replaceInventory("a", [report("USB-1", "pd-aaaa1111"), report("127.0.0.1:5555", "pd-aaaa1111"), report("USB-2", "pd-aaab2222")]);
  await r.attach(hello("b", "lab-b"), session());
  await r.replaceInventory("b", [report("FAKE-2", "pd-aaab2222")]);
  return r;
}

describe("Registry.serialFor: a physical id or a unique prefix of one where a serial goes", () => {
  it("keeps a reported serial, and anything that is no physical id, as given", async () => {
    const r = await farm();
    expect(r.serialFor("USB-2")).toBe("USB-2");
    expect(r.serialFor("emulator-5554")).toBe("emulator-5554");
  });

  it("takes the whole id, a prefix, or the id as a list cut it, to a serial its phone is reported on", async () => {
    const r = await farm();
    expect(r.serialFor("pd-aaab2222")).toBe("USB-2");
    expect(r.serialFor("pd-aaab")).toBe("USB-2");
    expect(r.serialFor("pd-aaab…")).toBe("USB-2");
    // One phone on two serials of one agent: either reaches it; the first by serial, every time.
    expect(r.serialFor("pd-aaaa")).toBe("127.0.0.1:5555");
    expect(r.route(r.serialFor("pd-aaaa")).physicalId).toBe("pd-aaaa1111");
  });

  it("refuses a prefix of several phones' ids, naming them, before anything is routed", async () => {
    const r = await farm();
    const e = failure(() => r.serialFor("pd-aaa"));
    expect(e).toMatchObject({ code: "DEVICE_AMBIGUOUS", field: "target.serial", dispatched: false, ambiguous: false });
    expect(e.message).toContain("pd-aaaa1111");
    expect(e.message).toContain("pd-aaab2222");
  });

  it("never names a phone through an unaccepted claim, and leaves an unknown id for route() to refuse", async () => {
    const r = await farm();
    expect(r.serialFor("pd-aaab", "lab-b")).toBe("pd-aaab");
    expect(r.serialFor("pd-zzzz")).toBe("pd-zzzz");
    expect(failure(() => r.route("pd-zzzz"))).toMatchObject({ code: "DEVICE_NOT_FOUND" });
  });
});
