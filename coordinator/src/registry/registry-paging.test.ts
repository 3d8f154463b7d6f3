import { BinaryReader } from "@bufbuild/protobuf/wire";
import { afterEach, describe, expect, it } from "vitest";
import { create, fromBinary } from "@bufbuild/protobuf";
import { toErrorReport } from "@farm/shared/errors";
import { AgentHelloSchema, DeviceReportSchema, type DeviceReport } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { DeviceSchema, type Device } from "@farm/shared/gen/farm/v1/registry_pb";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import { DEFAULT_PAGE_SIZE } from "../paging.js";
import { Registry, type AgentSession, type DeviceFilter } from "./registry.js";
import { SqliteRegistryStore } from "./sqlite-registry-store.js";

let opened: OpenedDatabase | undefined;

afterEach(() => {
  opened?.close();
  opened = undefined;
});

const hello = (id: string, name: string) => create(AgentHelloSchema, { agentId: id, name, hostname: "h", agentVersion: "t", protocolVersion: 2, heartbeatIntervalMs: 1000 });
const report = (serial: string, state = "device", physicalId = `pd-${serial}`): DeviceReport => create(DeviceReportSchema, { serial, state, properties: { model: "Pixel 7", physicalId, identityStatus: "ok" } });

function registry(): Promise<Registry> {
  opened ??= openDatabase(":memory:");
  return Registry.open(new SqliteRegistryStore(opened.db), { heartbeatMisses: 3 });
}

/** Attaches an agent reporting these serials; returns its session (to detach it). */
async function agent(r: Registry, id: string, name: string, serials: string[]): Promise<AgentSession> {
  const session: AgentSession = { terminate: () => undefined };
  await r.attach(hello(id, name), session);
  await r.replaceInventory(id, serials.map((s) => report(s)));
  return session;
}

const key = (d: Device) => `${d.agentId}/${d.serial}`;

function refusal(f: () => unknown) {
  try {
    f();
    return null;
  } catch (err) {
    return toErrorReport(err);
  }
}

/**
 * Reads every page, running `between` (with the last key read) after each
 * page but the last; returns the keys in the order read.
 */
async function readAll(r: Registry, filter: DeviceFilter, pageSize: number, between: (page: number, last: string) => Promise<void> | void = () => undefined): Promise<string[]> {
  const out: string[] = [];
  let pageToken = "";
  for (let page = 0;; page++) {
    // A page that does not move on would loop forever.
    if (page > 500) throw new Error("paging does not end");
    const res = r.listDevicesPage(filter, { pageSize, pageToken });
    expect(res.items.length).toBeLessThanOrEqual(pageSize);
    out.push(...res.items.map(key));
    if (!res.nextPageToken) return out;
    // Never a token to an empty page: a full page says there is more.
    expect(res.items).toHaveLength(pageSize);
    pageToken = res.nextPageToken;
    await between(page, out[out.length - 1] as string);
  }
}

const sorted = (keys: string[]) => [...keys].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

describe("paged device listing", () => {
  it("lists by (agent id, serial) whatever the agent names, each device once, across pages of any size", async () => {
    const r = await registry();
    // Names sort the other way round from ids: the order is the ids'.
    await agent(r, "b-id", "alpha", ["S-3", "S-1", "S-2"]);
    await agent(r, "a-id", "zulu", ["S-9", "S-10"]);
    await agent(r, "c-id", "mike", []);
    await agent(r, "d-id", "kilo", ["X"]);
    const expected = ["a-id/S-10", "a-id/S-9", "b-id/S-1", "b-id/S-2", "b-id/S-3", "d-id/X"];
    for (const size of [1, 2, 3, 5, 6, 7, 1000]) expect(await readAll(r, {}, size)).toEqual(expected);
    expect(r.listDevicesPage({}, { pageSize: 6, pageToken: "" }).nextPageToken).toBe("");
    expect(r.listDevicesPage({}, { pageSize: 5, pageToken: "" }).nextPageToken).not.toBe("");
  });

  it("reads 0 as the default page size, and refuses a negative one on page_size", async () => {
    const r = await registry();
    await agent(r, "a", "lab", Array.from({ length: DEFAULT_PAGE_SIZE + 5 }, (_, i) => `S-${String(i).padStart(3, "0")}`));
    const first = r.listDevicesPage({}, { pageSize: 0, pageToken: "" });
    expect(first.items).toHaveLength(DEFAULT_PAGE_SIZE);
    expect(r.listDevicesPage({}, { pageSize: 0, pageToken: first.nextPageToken }).items).toHaveLength(5);
    expect(refusal(() => r.listDevicesPage({}, { pageSize: -1, pageToken: "" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_size" });
  });

  it("neither repeats nor misses a device when devices and agents come and go between pages", async () => {
    const r = await registry();
    const sessions = new Map<string, AgentSession>();
    for (const id of ["a", "b", "c", "d"]) sessions.set(id, await agent(r, id, `lab-${id}`, ["S-2", "S-4", "S-6", "S-8"]));
    // A full read first keeps every agent's order: each change below must drop what it changes.
    expect(r.listDevicesPage({}, { pageSize: 1000, pageToken: "" }).items).toHaveLength(16);
    const keys = await readAll(r, {}, 3, async (page) => {
      if (page === 0) {
        // The device the next page starts after goes away ("a/S-6" ended page 0), one before the cursor appears,
        // one after it appears.
        await r.removeDevice("a", "S-6");
        await r.upsertDevice("a", report("S-1"));
        await r.upsertDevice("b", report("S-3"));
      } else if (page === 1) {
        // An inventory ahead of the cursor is replaced: two serials go, two appear.
        await r.replaceInventory("c", [report("S-2"), report("S-5"), report("S-8"), report("S-9")]);
      } else if (page === 2) {
        // The agent of the next page goes away entirely, and a new one appears ahead.
        await r.detach("d", sessions.get("d") as AgentSession);
        await r.removeAgent("d");
        await agent(r, "e", "lab-e", ["S-1"]);
      }
    });
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys).toEqual(sorted(keys));
    // Present from the first page to the last: listed exactly once.
    const throughout = ["a/S-2", "a/S-4", "a/S-8", "b/S-2", "b/S-4", "b/S-6", "b/S-8", "c/S-2", "c/S-8"];
    for (const k of throughout) expect(keys).toContain(k);
    // Added ahead of the cursor: listed; added behind it: not (it is in no page read after it).
    expect(keys).toContain("b/S-3");
    expect(keys).toContain("c/S-5");
    expect(keys).toContain("c/S-9");
    expect(keys).toContain("e/S-1");
    expect(keys).not.toContain("a/S-1");
    // Gone before their page was read: not listed.
    expect(keys.some((k) => k.startsWith("d/"))).toBe(false);
    expect(keys).not.toContain("c/S-4");
  });

  it("keeps every device in its place under random changes between pages", async () => {
    // A small deterministic generator: the same run every time.
    let seed = 42;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const r = await registry();
    const ids = ["a1", "b2", "c3", "d4", "e5"];
    for (const id of ids) await agent(r, id, `lab-${id}`, Array.from({ length: 8 }, (_, i) => `S-${i * 2}`));
    const present = () => new Set(r.listDevicesPage({}, { pageSize: 1000, pageToken: "" }).items.map(key));
    for (let round = 0; round < 20; round++) {
      const before = present();
      const removed = new Set<string>();
      /** Added ahead of where the reader is (and not removed since): a later page must list them. */
      const ahead = new Set<string>();
      const keys = await readAll(r, {}, 1 + rand(7), async (_page, last) => {
        const now = present();
        for (let k = 0; k < 3; k++) {
          const id = ids[rand(ids.length)] as string;
          const serial = `S-${rand(20)}`;
          const k2 = `${id}/${serial}`;
          if (rand(2) === 0) {
            await r.upsertDevice(id, report(serial, rand(2) === 0 ? "device" : "offline"));
            if (!now.has(k2) && k2 > last) ahead.add(k2);
            now.add(k2);
          } else {
            await r.removeDevice(id, serial);
            removed.add(k2);
            ahead.delete(k2);
            now.delete(k2);
          }
        }
      });
      expect(new Set(keys).size).toBe(keys.length);
      expect(keys).toEqual(sorted(keys));
      for (const k of before) if (!removed.has(k)) expect(keys).toContain(k);
      for (const k of ahead) expect(keys).toContain(k);
    }
  });

  it("does not move a device whose state or agent name changes", async () => {
    const r = await registry();
    const a = await agent(r, "a", "lab-a", ["A-1", "A-2"]);
    await agent(r, "b", "lab-b", ["B-1", "B-2"]);
    const first = r.listDevicesPage({}, { pageSize: 2, pageToken: "" });
    expect(first.items.map(key)).toEqual(["a/A-1", "a/A-2"]);
    // Agent a comes back under a name that sorts after b's, and one of b's devices goes offline.
    await r.detach("a", a);
    await agent(r, "a", "zz-renamed", ["A-1", "A-2"]);
    await r.upsertDevice("b", report("B-1", "offline"));
    expect(r.listDevicesPage({}, { pageSize: 2, pageToken: first.nextPageToken }).items.map((d) => [key(d), d.state])).toEqual([
      ["b/B-1", "offline"],
      ["b/B-2", "device"],
    ]);
  });

  it("filters by agent, state and physical id, and binds its tokens to those filters", async () => {
    const r = await registry();
    await agent(r, "a", "lab-a", ["A-1", "A-2", "A-3"]);
    await agent(r, "b", "lab-b", ["B-1", "B-2", "B-3"]);
    await r.upsertDevice("a", report("A-2", "offline"));
    await r.upsertDevice("b", report("B-3", "offline"));
    // Two serials of one phone, on two agents (the second claim is quarantined, and still listed).
    await r.upsertDevice("b", report("USB-9", "device", "pd-shared"));
    await r.upsertDevice("a", report("WIFI-9", "device", "pd-shared"));
    expect(await readAll(r, { state: "offline" }, 1)).toEqual(["a/A-2", "b/B-3"]);
    expect(await readAll(r, { agent: "lab-b" }, 2)).toEqual(["b/B-1", "b/B-2", "b/B-3", "b/USB-9"]);
    expect(await readAll(r, { agent: "b", state: "device" }, 1)).toEqual(["b/B-1", "b/B-2", "b/USB-9"]);
    expect(await readAll(r, { physicalId: "pd-shared" }, 1)).toEqual(["a/WIFI-9", "b/USB-9"]);
    expect(await readAll(r, { state: "quarantined" }, 1)).toEqual(["a/WIFI-9"]);

    const token = r.listDevicesPage({ state: "offline" }, { pageSize: 1, pageToken: "" }).nextPageToken;
    expect(token).not.toBe("");
    for (const other of [{}, { state: "device" }, { state: "offline", agent: "a" }, { state: "offline", physicalId: "pd-shared" }]) {
      expect(refusal(() => r.listDevicesPage(other, { pageSize: 1, pageToken: token })), JSON.stringify(other)).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    }
    // An empty filter is no filter: the token still reads on.
    expect(r.listDevicesPage({ state: "offline", agent: "" }, { pageSize: 1, pageToken: token }).items.map(key)).toEqual(["b/B-3"]);
    // Another list's token is not a devices token.
    const agentsToken = r.listAgentsPage({ pageSize: 1, pageToken: "" }).nextPageToken;
    expect(refusal(() => r.listDevicesPage({}, { pageSize: 1, pageToken: agentsToken }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(refusal(() => r.listDevicesPage({}, { pageSize: 1, pageToken: "garbage!" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
  });

  it("serves the pre-encoded pages with the same devices and tokens as the decoded ones", async () => {
    const r = await registry();
    await agent(r, "a", "lab-a", ["A-1", "A-2", "A-3"]);
    await agent(r, "b", "lab-b", ["B-1", "B-2"]);
    let decodedToken = "";
    let encodedToken = "";
    for (;;) {
      const decoded = r.listDevicesPage({ agent: "" }, { pageSize: 2, pageToken: decodedToken });
      const encoded = r.listDevicesEncoded({}, { pageSize: 2, pageToken: encodedToken });
      expect(encoded.items.map((b) => fromBinary(DeviceSchema, b))).toEqual(decoded.items);
      // The same devices as their field carries them: the length, then the same bytes.
      const delimited = r.listDevicesEncoded({}, { pageSize: 2, pageToken: encodedToken }, "delimited");
      expect(delimited.items.map((b) => fromBinary(DeviceSchema, new BinaryReader(b).bytes()))).toEqual(decoded.items);
      expect(encoded.nextPageToken).toBe(decoded.nextPageToken);
      if (!decoded.nextPageToken) break;
      decodedToken = decoded.nextPageToken;
      encodedToken = encoded.nextPageToken;
    }
    // A changed device is encoded again, not served from its old bytes.
    await r.upsertDevice("a", report("A-1", "offline"));
    expect(fromBinary(DeviceSchema, r.listDevicesEncoded({}, { pageSize: 1, pageToken: "" }).items[0] as Uint8Array).state).toBe("offline");
  });
});

describe("paged agent listing", () => {
  it("lists agents by id, each once, with agents added and removed between pages", async () => {
    const r = await registry();
    const sessions = new Map<string, AgentSession>();
    for (const [id, name] of [["c", "alpha"], ["a", "zulu"], ["e", "mike"], ["b", "kilo"]] as const) sessions.set(id, await agent(r, id, name, []));
    const first = r.listAgentsPage({ pageSize: 2, pageToken: "" });
    expect(first.items.map((a) => a.id)).toEqual(["a", "b"]);
    // The last agent of the page goes, one appears behind the cursor and one ahead.
    await r.detach("b", sessions.get("b") as AgentSession);
    await r.removeAgent("b");
    await agent(r, "aa", "new-behind", []);
    await agent(r, "d", "new-ahead", []);
    const second = r.listAgentsPage({ pageSize: 2, pageToken: first.nextPageToken });
    expect(second.items.map((a) => a.id)).toEqual(["c", "d"]);
    // Only an agent added: the kept order must still see it.
    await agent(r, "f", "late", []);
    const third = r.listAgentsPage({ pageSize: 2, pageToken: second.nextPageToken });
    expect(third.items.map((a) => a.id)).toEqual(["e", "f"]);
    expect(third.nextPageToken).toBe("");
    expect(refusal(() => r.listAgentsPage({ pageSize: -5, pageToken: "" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_size" });
    await r.replaceInventory("a", [report("S-1"), report("S-2")]);
    const devicesToken = r.listDevicesPage({}, { pageSize: 1, pageToken: "" }).nextPageToken;
    expect(refusal(() => r.listAgentsPage({ pageSize: 1, pageToken: devicesToken }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
  });
});
