import { afterEach, describe, expect, it } from "vitest";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { Errors, farmError, toErrorReport } from "@farm/shared/errors";
import { AdbTunnelService } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { createLogger } from "@farm/shared/log";
import { ActivityLog } from "../activity/activity-log.js";
import { accessRules, refusal } from "../auth/access-rules.js";
import { principalKey } from "../auth/auth.js";
import type { Principal } from "../auth/token-store.js";
import { openDatabase, type OpenedDatabase } from "../db/open-database.js";
import { DeviceLabels } from "../devices/device-labels.js";
import { LeaseManager } from "../leases/lease-manager.js";
import { SqliteLeaseStore } from "../leases/sqlite-lease-store.js";
import { Registry } from "../registry/registry.js";
import { SqliteRegistryStore } from "../registry/sqlite-registry-store.js";
import { AdbStreamRelay } from "./adb-stream-relay.js";
import { registerAdbTunnelService } from "./adb-tunnel-service.js";
import { tunnelEntry } from "./testing/tunnel-entry.js";
import { Tunnels } from "./tunnels.js";
import { sqliteDatabaseOf } from "../db/database.js";
import { createActivityStore, createDeviceLabelStore } from "../db/stores.js";

let opened: OpenedDatabase | undefined;

afterEach(() => {
  opened?.close();
  opened = undefined;
});

const people: Record<string, Principal> = {
  alice: { tokenName: "alice", kind: "user", role: "operator", admin: false },
  bob: { tokenName: "bob", kind: "user", role: "operator", admin: false },
  vera: { tokenName: "vera", kind: "user", role: "viewer", admin: false },
  root: { tokenName: "root", kind: "user", role: "admin", admin: true },
};

/** The service over an in-process transport, each call as the principal named in x-as, with the real access table applied. */
async function served() {
  opened = openDatabase(":memory:");
  const db = opened.db;
  const log = createLogger({ level: "error" });
  const registry = await Registry.open(new SqliteRegistryStore(db), { heartbeatMisses: 3 });
  const labels = await DeviceLabels.open(createDeviceLabelStore(sqliteDatabaseOf(db)));
  const leases = await LeaseManager.open(new SqliteLeaseStore(db), registry, labels, log);
  const tunnels = new Tunnels();
  const transport = createRouterTransport((router) => registerAdbTunnelService(router, { registry, leases, activity: new ActivityLog(createActivityStore(sqliteDatabaseOf(db))), tunnels, relay: new AdbStreamRelay(), log }), {
    router: {
      interceptors: [
        (next) => (req) => {
          const principal = people[req.header.get("x-as") ?? ""];
          if (!principal) throw farmError(Errors.UNAUTHENTICATED, "who?");
          const method = `${req.service.typeName}/${req.method.name}`;
          const rule = accessRules[method];
          const why = rule ? refusal(rule, principal, method) : "no rule";
          if (why) throw farmError(Errors.PERMISSION_DENIED, why);
          req.contextValues.set(principalKey, principal);
          return next(req);
        },
      ],
    },
  });
  const client = createClient(AdbTunnelService, transport);
  const as = (who: string) => ({ headers: { "x-as": who } });
  return { tunnels, client, as };
}

const ids = (res: { tunnels: { tunnelId: string }[] }) => res.tunnels.map((t) => t.tunnelId).sort();

describe("ListTunnels", () => {
  it("shows every tunnel to any viewer, by phone, and with mine only those the caller may close (an admin: all)", async () => {
    const { tunnels, client, as } = await served();
    tunnels.add(tunnelEntry("t-a1", "alice", "pd-1"));
    tunnels.add(tunnelEntry("t-a2", "alice", "pd-2"));
    tunnels.add(tunnelEntry("t-b1", "bob", "pd-1"));

    // Anyone who sees the device page sees who has a tunnel on it.
    for (const who of ["alice", "bob", "vera", "root"]) expect(ids(await client.listTunnels({}, as(who)))).toEqual(["t-a1", "t-a2", "t-b1"]);
    expect(ids(await client.listTunnels({ physicalId: "pd-1" }, as("vera")))).toEqual(["t-a1", "t-b1"]);
    expect(ids(await client.listTunnels({ physicalId: "pd-9" }, as("vera")))).toEqual([]);

    // `farm adb list`: the caller's own; an admin's: everyone's.
    expect(ids(await client.listTunnels({ mine: true }, as("alice")))).toEqual(["t-a1", "t-a2"]);
    expect(ids(await client.listTunnels({ mine: true }, as("vera")))).toEqual([]);
    expect(ids(await client.listTunnels({ mine: true }, as("root")))).toEqual(["t-a1", "t-a2", "t-b1"]);
    expect(ids(await client.listTunnels({ mine: true, physicalId: "pd-1" }, as("bob")))).toEqual(["t-b1"]);

    const one = (await client.listTunnels({ physicalId: "pd-2" }, as("vera"))).tunnels[0];
    expect(one).toMatchObject({ tunnelId: "t-a2", owner: "alice", serial: "S-pd-2", agentName: "lab-1", openedAtMs: 1_700_000_000_000n, bytesToDevice: 10n, bytesFromDevice: 20n, openStreams: 0 });
  });

  it("pages like every List*: oldest first, next_page_token until the last page, a token bound to its filters", async () => {
    const { tunnels, client, as } = await served();
    const made: string[] = [];
    for (let i = 0; i < 5; i++) {
      const t = tunnelEntry(`t-${i}`, i === 4 ? "bob" : "alice", "pd-1");
      t.openedAt += 5 - i; // opened in reverse id order: the list follows open time
      tunnels.add(t);
      made.unshift(t.tunnelId);
    }
    const seen: string[] = [];
    let pageToken = "";
    let pages = 0;
    do {
      const page = await client.listTunnels({ pageSize: 2, pageToken }, as("vera"));
      expect(page.tunnels.length).toBeLessThanOrEqual(2);
      seen.push(...page.tunnels.map((t) => t.tunnelId));
      pageToken = page.nextPageToken;
      pages++;
    } while (pageToken);
    expect(seen).toEqual(made);
    expect(pages).toBe(3);

    const first = await client.listTunnels({ pageSize: 1, mine: true }, as("alice"));
    expect(first.nextPageToken).not.toBe("");
    const report = (p: Promise<unknown>) => p.then(() => null, toErrorReport);
    expect(await report(client.listTunnels({ pageSize: 1, pageToken: first.nextPageToken }, as("alice")))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_token" });
    expect(await report(client.listTunnels({ pageSize: -1 }, as("alice")))).toMatchObject({ code: "INVALID_ARGUMENT", field: "page_size" });
    expect((await client.listTunnels({ pageSize: 100, mine: true }, as("alice"))).nextPageToken).toBe("");
  });

  it("lets an admin close anyone's tunnel, an owner their own, and nobody else (a viewer not at all)", async () => {
    const { tunnels, client, as } = await served();
    const a = tunnelEntry("t-a1", "alice", "pd-1");
    const b = tunnelEntry("t-b1", "bob", "pd-1");
    tunnels.add(a);
    tunnels.add(b);
    const report = (p: Promise<unknown>) => p.then(() => null, toErrorReport);

    expect(await report(client.closeTunnel({ tunnelId: "t-a1" }, as("vera")))).toMatchObject({ code: "PERMISSION_DENIED" });
    expect(await report(client.closeTunnel({ tunnelId: "t-a1" }, as("bob")))).toMatchObject({ code: "TUNNEL_NOT_FOUND" });
    expect(a.closedWith).toBeUndefined();

    await client.closeTunnel({ tunnelId: "t-a1" }, as("root"));
    expect(toErrorReport(a.closedWith)).toMatchObject({ code: "TUNNEL_CLOSED", message: "closed by the admin root" });
    await client.closeTunnel({ tunnelId: "t-b1" }, as("bob"));
    expect(toErrorReport(b.closedWith)).toMatchObject({ code: "TUNNEL_CLOSED", message: "closed by its owner" });
  });
});
