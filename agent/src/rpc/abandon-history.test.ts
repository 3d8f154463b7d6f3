import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { toErrorReport } from "@farm/shared/errors";
import { createLogger } from "@farm/shared/log";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { agentMetrics, type AgentMetrics } from "../agent-metrics.js";
import { openAgentDb } from "../db/open-agent-db.js";
import { openHostJournalDb } from "../db/host-journal-db.js";
import { DeviceHistory } from "../devices/device-history.js";
import type { DeviceView, DeviceWatcher } from "../devices/device-watcher.js";
import { DeviceOwnership, type ActionKind } from "../ownership/device-ownership.js";
import { OwnershipJournal } from "../ownership/ownership-journal.js";
import { agentDeviceService } from "./device-service.js";
import type { AgentServiceDeps } from "./service-deps.js";

/** DeviceOwnership only asks the watcher for a device and its aliases: one phone here (a real watcher needs an adb server). */
const phone: DeviceView = { serial: "s1", state: "device", facts: { props: {}, bootId: "boot-a" }, identity: { physicalId: "phys-a", identityStatus: "ok", pinLabel: "" } };
const watcher = { device: (s: string) => (s === "s1" ? phone : undefined), aliasesOf: () => ["s1"], snapshot: () => [phone] } as unknown as DeviceWatcher;

/** An action kind whose dispatch was sent and then lost: its outcome is unknown until an admin abandons it. */
const flaky: ActionKind<{ text: string }, never> = {
  kind: "flaky",
  journalRequest: (req) => ({ text: req.text }),
  dispatch: (_d, _r, _a, _s, progress) => {
    progress.phase = "sent";
    return Promise.reject(new Error("adb connection reset"));
  },
  prove: () => Promise.resolve(undefined),
};

let dir: string;
let closeAll: () => Promise<void> = () => Promise.resolve();

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-abandon-history-"));
});
afterEach(async () => {
  await closeAll();
  await rm(dir, { recursive: true, force: true });
});

describe("abandoning an action while the device history cannot be written", () => {
  it("still answers the abandoned action; the lost history entry is logged and counted on the agent's /metrics", async () => {
    const host = openHostJournalDb(dir);
    const agentDb = openAgentDb(join(dir, "agent.db"));
    const journal = new OwnershipJournal(host.db, host.sqlite);
    const history = new DeviceHistory(agentDb.db);
    const own = new DeviceOwnership({ lockDir: dir, journal, watcher, history, agentId: "agent-test" });
    const lost = await own.run(flaky, { text: "x" }, { serial: "s1", deadlineMs: Date.now() + 2_000, requestedBy: "alice" }).then(() => undefined, toErrorReport);
    expect(lost?.ambiguous).toBe(true);
    // From here on the history's inserts fail, as on a full disk.
    agentDb.sqlite.exec("CREATE TRIGGER device_events_full BEFORE INSERT ON device_events BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END");

    const logged: { level: string; msg: string; kind?: string }[] = [];
    const log = createLogger({ level: "warn", write: (line) => logged.push(JSON.parse(line) as (typeof logged)[number]) });
    const metrics: AgentMetrics = agentMetrics({ watcher, draining: () => false, videoWorkers: () => Promise.resolve(0), history });
    const url = await metrics.listen({ host: "127.0.0.1", port: 0 });
    closeAll = async () => {
      await metrics.close();
      agentDb.close();
      host.close();
    };
    const deps = {
      ownership: own,
      history,
      log,
      shell: { kind: "shell" },
      setProp: { kind: "setprop" },
      input: { kind: "input" },
      reboot: { kind: "reboot" },
      install: { kind: "install" },
      pushFile: { kind: "push-file" },
    } as unknown as AgentServiceDeps;
    const client = createClient(DeviceService, createRouterTransport((router) => router.service(DeviceService, agentDeviceService(deps))));

    const res = await client.abandonAction({ target: { serial: "s1" }, actionId: lost?.actionId as string, reason: "phone was wiped" }, { headers: { "x-farm-requested-by": "root", "x-farm-requested-by-admin": "1" } });
    expect(res.action).toMatchObject({ actionId: lost?.actionId, state: "abandoned", abandonReason: "phone was wiped", abandonedBy: "root" });
    expect(journal.get(lost?.actionId as string)?.state).toBe("abandoned");
    expect(logged).toContainEqual(expect.objectContaining({ level: "error", msg: "could not write the device history; the outcome stands", kind: "action-abandoned" }));
    const text = await (await fetch(url)).text();
    expect(text).toContain("farm_agent_history_write_failures_total{kind=\"action-abandoned\"} 1");
  });
});
