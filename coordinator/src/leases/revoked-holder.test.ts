import { afterEach, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { AgentHelloSchema, DeviceReportSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { createLogger } from "@farm/shared/log";
import { ActivityLog } from "../activity/activity-log.js";
import { sqliteDatabase, type FarmDatabase } from "../db/database.js";
import { DeviceLabels } from "../devices/device-labels.js";
import { Registry } from "../registry/registry.js";
import { Sessions } from "../sessions/sessions.js";
import { LeaseManager, type Grant } from "./lease-manager.js";
import { endWhatRevokedHeld } from "./revoked-holder.js";
import type { Selector } from "./selector.js";
import { createActivityStore, createDeviceLabelStore, createLeaseStore, createRegistryStore, createSessionStore } from "../db/stores.js";

const log = createLogger({ level: "error" });
let opened: FarmDatabase | undefined;
let leases: LeaseManager | undefined;

afterEach(async () => {
  leases?.abandonCalls(new Error("test over"));
  await opened?.close();
  opened = undefined;
});

const codeOf = (err: unknown) => ConnectError.from(err).findDetails(ErrorDetailSchema)[0]?.code ?? "";
const on = (physicalId: string): Selector => ({ serial: "", physicalId, labels: {}, model: "", apiLevelMin: 0, apiLevelMax: 0, agent: "" });

async function farm() {
  opened = sqliteDatabase(":memory:");
  const registry = await Registry.open(createRegistryStore(opened), { heartbeatMisses: 3 });
  const labels = await DeviceLabels.open(createDeviceLabelStore(opened));
  leases = await LeaseManager.open(createLeaseStore(opened), registry, labels, log);
  await registry.attach(create(AgentHelloSchema, { agentId: "a-1", name: "lab-1", hostname: "h", agentVersion: "t", protocolVersion: 2, heartbeatIntervalMs: 1000 }), { terminate: () => undefined });
  await registry.replaceInventory(
    "a-1",
    ["1", "2"].map((n) => create(DeviceReportSchema, { serial: `S-${n}`, state: "device", properties: { physicalId: `pd-${n}`, identityStatus: "ok", model: "Pixel 7", apiLevel: 34 } })),
  );
  return { leases, activity: new ActivityLog(createActivityStore(opened)), sessions: new Sessions(createSessionStore(opened)), log };
}

function acquire(m: LeaseManager, holder: string, physicalId: string, signal = new AbortController().signal): Promise<Grant> {
  return m.acquire(holder, on(physicalId), { waitMs: 60_000, ttlMs: 60_000, ticket: "", signal });
}

describe("endWhatRevokedHeld", () => {
  it("ends the holder's leases, sessions and waits, journals each with who revoked, and ends a grant made while its calls were ending", async () => {
    const deps = await farm();
    const held = await acquire(deps.leases, "alice", "pd-1");
    const session = await deps.sessions.start("alice", held.lease, { name: "checkout", context: {}, ocr: false });
    // A second wait of hers for the same phone, whose call ends with her calls (as OpenCalls ends it).
    const waitCall = new AbortController();
    const queued = new Promise<void>((resolve) => deps.leases.events.once("queue", () => resolve()));
    const waiting = acquire(deps.leases, "alice", "pd-1", waitCall.signal).then(() => "granted", codeOf);
    await queued;
    // A call of hers that got in as her leases ended (past its token check, not yet among her open calls):
    // granted after the first pass, ended by the second.
    let straggler: Promise<Grant> | undefined;
    deps.leases.events.once("leaseEnded", () => (straggler = acquire(deps.leases, "alice", "pd-2")));

    const counts = await endWhatRevokedHeld(deps, "alice", "root", () => waitCall.abort());

    expect(counts).toEqual({ leases: 2, waiters: 1 });
    expect(await waiting).toBe("LEASE_WAIT_CANCELLED");
    const late = await straggler!;
    expect(deps.leases.leaseOf("pd-1")).toBeUndefined();
    expect(deps.leases.leaseOf("pd-2")).toBeUndefined();
    expect((await createLeaseStore(opened!).leaseById(late.lease.leaseId))?.state).toBe("released");
    expect((await deps.sessions.get(session.sessionId)).status).toBe("lease_ended");
    const page = await deps.activity.listPage({}, { pageSize: 50, pageToken: "" });
    const journaled = page.items.filter((e) => e.command === "revokeToken").map((e) => ({ caller: e.caller, leaseId: e.leaseId, serial: e.serial, detail: e.detail }));
    expect(journaled).toEqual(
      expect.arrayContaining([
        { caller: "root", leaseId: held.lease.leaseId, serial: "S-1", detail: "token \"alice\" revoked by root: its lease ended, the phone is free" },
        { caller: "root", leaseId: late.lease.leaseId, serial: "S-2", detail: "token \"alice\" revoked by root: its lease ended, the phone is free" },
        { caller: "root", leaseId: "", serial: "", detail: "token \"alice\" revoked by root: its wait for physical id pd-1 is dropped" },
        { caller: "root", leaseId: "", serial: "", detail: "token \"alice\" revoked by root: 2 lease(s) ended, 1 wait(s) dropped" },
      ]),
    );
    expect(journaled).toHaveLength(4);
  });

  it("journals nothing but the revocation for a token that held nothing, and ends its calls even when ending its leases fails", async () => {
    const deps = await farm();
    expect(await endWhatRevokedHeld(deps, "bob", "root", () => undefined)).toEqual({ leases: 0, waiters: 0 });
    const page = await deps.activity.listPage({}, { pageSize: 50, pageToken: "" });
    expect(page.items.map((e) => e.detail)).toEqual(["token \"bob\" revoked by root: 0 lease(s) ended, 0 wait(s) dropped"]);

    let callsEnded = false;
    const failing = { ...deps, leases: { revokeHolder: () => Promise.reject(new Error("database gone")) } as unknown as LeaseManager };
    await expect(endWhatRevokedHeld(failing, "bob", "root", () => (callsEnded = true))).rejects.toThrow("database gone");
    expect(callsEnded).toBe(true);
  });
});
