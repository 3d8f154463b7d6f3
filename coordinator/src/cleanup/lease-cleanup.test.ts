import { afterEach, describe, expect, it } from "vitest";
import { create, type DescMessage, type DescMethodUnary, type MessageInitShape } from "@bufbuild/protobuf";
import { Errors, farmError } from "@farm/shared/errors";
import type { CleanupPolicyDoc } from "@farm/shared/cleanup/cleanup-policy";
import { AgentHelloSchema, DeviceReportSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { CleanPhoneResponseSchema, ReadCleanupBaselineResponseSchema } from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import { createLogger } from "@farm/shared/log";
import { ActivityLog } from "../activity/activity-log.js";
import type { FarmDatabase } from "../db/database.js";
import { openTestDatabase } from "../db/testing/test-database.js";
import { DeviceLabels } from "../devices/device-labels.js";
import { LeaseManager } from "../leases/lease-manager.js";
import type { Selector } from "../leases/selector.js";
import { Registry } from "../registry/registry.js";
import { createActivityStore, createDeviceCleanupStore, createDeviceLabelStore, createLeaseStore, createRegistryStore } from "../db/stores.js";
import { DeviceCleanups } from "./device-cleanups.js";
import { cleanPhonesBetweenUsers } from "./lease-cleanup.js";

const log = createLogger({ level: "error" });
const sel: Selector = { serial: "S-1", physicalId: "", labels: {}, model: "", apiLevelMin: 0, apiLevelMax: 0, agent: "" };
const policy: CleanupPolicyDoc = { timeoutMs: 60_000, uninstallInstalled: true, keepPackages: [], clearData: [], removeNewFilesUnder: ["/sdcard/Download"], settings: [], airplaneModeOff: true, pressHome: true };

let db: FarmDatabase | undefined;
const managers: LeaseManager[] = [];

afterEach(async () => {
  for (const m of managers.splice(0)) m.abandonCalls(new Error("test over"));
  await db?.close();
  db = undefined;
});

/**
 * The agent's side of the two cleanup calls, as the coordinator sees it
 * over the control stream: answers, errors with the farm's codes, and a
 * call that never answers fails at the caller's deadline.
 */
class AgentStandIn {
  readonly calls: { method: string; by: string; request: unknown }[] = [];
  cleanAnswer: "ok" | "step-fails" | "never" = "ok";
  private release: (() => void) | undefined;
  /** While set, CleanPhone waits for `open()`. */
  gated = false;

  terminate(): void {}

  open(): void {
    this.gated = false;
    this.release?.();
  }

  async call<I extends DescMessage, O extends DescMessage>(method: DescMethodUnary<I, O>, request: MessageInitShape<I>, by: { tokenName: string }, deadlineMs: number): Promise<unknown> {
    this.calls.push({ method: method.name, by: by.tokenName, request });
    if (method.name === "ReadCleanupBaseline") return create(ReadCleanupBaselineResponseSchema, { baseline: { packages: ["com.kept"], paths: [] } });
    if (method.name !== "CleanPhone") throw new Error(`unexpected ${method.name}`);
    if (this.gated) await new Promise<void>((resolve) => (this.release = resolve));
    if (this.cleanAnswer === "never") {
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, deadlineMs - Date.now())));
      throw farmError(Errors.DEADLINE_EXCEEDED, "the agent did not answer before the deadline");
    }
    const failed = this.cleanAnswer === "step-fails";
    return create(CleanPhoneResponseSchema, {
      actionId: "act-1",
      ok: !failed,
      steps: [
        { action: "uninstall", target: "com.new", ok: !failed, error: failed ? "Failure [DELETE_FAILED_INTERNAL_ERROR]" : "" },
        { action: "home", target: "KEYCODE_HOME", ok: true, error: "" },
      ],
    });
  }
}

async function farm(timeoutMs = policy.timeoutMs) {
  db = await openTestDatabase("sqlite");
  const registry = await Registry.open(createRegistryStore(db), { heartbeatMisses: 3 });
  const labels = await DeviceLabels.open(createDeviceLabelStore(db));
  const leases = await LeaseManager.open(createLeaseStore(db), registry, labels, log);
  managers.push(leases);
  registry.events.on("change", () => leases.kick(leases.dispatch()));
  const agent = new AgentStandIn();
  await registry.attach(create(AgentHelloSchema, { agentId: "a-1", name: "lab-1", hostname: "h", agentVersion: "t", protocolVersion: 2, heartbeatIntervalMs: 1000 }), agent);
  await registry.replaceInventory("a-1", [create(DeviceReportSchema, { serial: "S-1", state: "device", properties: { physicalId: "pd-1", identityStatus: "ok", model: "Pixel 7", apiLevel: 34 } })]);
  const cleanups = await DeviceCleanups.open(createDeviceCleanupStore(db), new Set(), (id, hold) => registry.setHold(id, hold));
  const activity = new ActivityLog(createActivityStore(db));
  const ended: string[] = [];
  const cleanup = cleanPhonesBetweenUsers({ registry, leases, cleanups, activity, policy: { ...policy, timeoutMs }, log, endLeaseOnAgent: async (l) => void ended.push(l.leaseId) });
  const acquire = (holder: string, waitMs = 0) => leases.acquire(holder, sel, { waitMs, ttlMs: 60_000, ticket: "", signal: new AbortController().signal });
  const rows = async () => (await activity.listPage({}, { pageSize: 50, pageToken: "" })).items;
  return { registry, leases, cleanups, agent, cleanup, acquire, ended, rows };
}

describe("cleaning phones between users", () => {
  it("reads the baseline before the holder gets the lease, and gives the phone to the next waiter only once it is clean", async () => {
    const f = await farm();
    const first = await f.acquire("alice");
    // Read before acquire resolved, as farm:cleanup.
    expect(f.agent.calls).toEqual([expect.objectContaining({ method: "ReadCleanupBaseline", by: "farm:cleanup" })]);
    expect(f.cleanups.rowOf("pd-1")).toMatchObject({ state: "leased", leaseId: first.lease.leaseId });

    const next = f.acquire("bob", 60_000);
    let granted = false;
    void next.then(() => (granted = true));
    f.agent.gated = true;
    await f.leases.release(first.token);
    // Held at once: listed cleaning, and the waiter still waits while the cleanup runs.
    expect(f.registry.listDevices({})[0]?.state).toBe("cleaning");
    // A dispatch decided now (the registry's change already asked for one) grants nothing.
    await f.leases.dispatch();
    expect(granted).toBe(false);
    f.agent.open();
    const second = await next;
    expect(second.lease.holder).toBe("bob");
    await f.cleanup.idle();
    // The agent heard of the lease's end first, then cleaned with the baseline it gave at grant.
    expect(f.ended).toEqual([first.lease.leaseId]);
    const clean = f.agent.calls.find((c) => c.method === "CleanPhone")?.request as { baseline: { packages: string[] }; leaseId: string };
    expect(clean).toMatchObject({ leaseId: first.lease.leaseId, baseline: { packages: ["com.kept"] } });
    const rows = await f.rows();
    expect(rows.filter((r) => r.caller === "farm:cleanup").map((r) => `${r.command} ${r.outcome}`)).toEqual(
      expect.arrayContaining(["cleanup.baseline ok", "cleanup.uninstall ok", "cleanup.home ok", "cleanup ok"]),
    );
  });

  it("marks the phone needs-attention when a step fails; leases skip it, and naming it is refused with the reason", async () => {
    const f = await farm();
    f.agent.cleanAnswer = "step-fails";
    const first = await f.acquire("alice");
    await f.leases.release(first.token);
    await f.cleanup.idle();
    expect(f.registry.listDevices({})[0]).toMatchObject({ state: "needs-attention", attentionReason: expect.stringMatching(/uninstall com\.new failed: Failure \[DELETE_FAILED_INTERNAL_ERROR\]/) });
    await expect(f.acquire("bob")).rejects.toMatchObject({ message: expect.stringMatching(/needs attention after a failed cleanup/) });
    expect((await f.rows()).some((r) => r.command === "cleanup.uninstall" && r.outcome === "CLEANUP_FAILED")).toBe(true);
    await f.cleanups.clear("pd-1");
    expect((await f.acquire("bob")).lease.holder).toBe("bob");
  });

  it("marks the phone needs-attention when the cleanup does not answer within the policy's timeout", async () => {
    const f = await farm(200);
    f.agent.cleanAnswer = "never";
    const first = await f.acquire("alice");
    await f.leases.release(first.token);
    await f.cleanup.idle();
    expect(f.registry.listDevices({})[0]).toMatchObject({ state: "needs-attention", attentionReason: expect.stringMatching(/did not finish within 0.2 s/) });
  });

  it("marks a phone needs-attention when its agent was offline at grant: no baseline to clean against", async () => {
    const f = await farm();
    const first = await f.acquire("alice");
    // As if the baseline read had failed: what the row says decides.
    await f.cleanups.recordBaseline(first.lease, undefined, "its agent was offline when the lease was granted");
    await f.leases.release(first.token);
    await f.cleanup.idle();
    expect(f.registry.listDevices({})[0]).toMatchObject({ state: "needs-attention", attentionReason: expect.stringMatching(/not cleaned: its agent was offline/) });
    expect(f.agent.calls.some((c) => c.method === "CleanPhone")).toBe(false);
  });
});
