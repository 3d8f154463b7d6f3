/**
 * Cost of device ownership per mutating action: the same `setprop` through
 * DeviceOwnership (OS lock + journal commit before and after + release)
 * (run as a detached device job with a completion record) against a bare adb shell round trip to the same simulated phone, in the
 * same run. Also journal commits per second on their own.
 *
 *   node test/dist/bench/ownership-cost.js [--actions 200]
 */
import { randomUUID } from "node:crypto";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { createLogger } from "@farm/shared/log";
import { createAdbClient } from "@farm/agent/adb/adb-client";
import { shellV2 } from "@farm/agent/adb/adb-shell";
import { DeviceWatcher } from "@farm/agent/devices/device-watcher";
import { openAgentDb } from "@farm/agent/db/open-agent-db";
import { JOURNAL_BYTES_PER_DEVICE, OwnershipJournal } from "@farm/agent/ownership/ownership-journal";
import { DeviceOwnership } from "@farm/agent/ownership/device-ownership";
import { DeviceHistory } from "@farm/agent/devices/device-history";
import { setPropAction } from "@farm/agent/actions/setprop-action";
import { DeviceJobs } from "@farm/agent/actions/device-job";
import { openHostJournalDb } from "@farm/agent/db/host-journal-db";
import { startDevsim, startAdbServer } from "../devsim/index.js";
import { makeTempDir } from "../support/temp-dir.js";
import { addedMs, emitReport, ms, round } from "./bench-report.js";
import { median, percentile } from "./proc-stats.js";

const { values } = parseArgs({ options: { actions: { type: "string", default: "200" }, "realistic-actions": { type: "string", default: "40" } } });
const N = Number(values.actions);
const NR = Number(values["realistic-actions"]);
/** A settled setprop's journal size (approximateSize: 512 + request + receipt). */
const HISTORY_ROW_BYTES = 600;
/** Phones of one agent acting at once, for the ownership-alone throughput. */
const PHONES_AT_ONCE = 8;

async function main(): Promise<void> {
  const dir = await makeTempDir("bench-own");
  const adb = await startAdbServer();
  // One instant phone (farm's own cost) and one under pixel-usb (what a user sees).
  const sim = await startDevsim({ devices: [{}, { latency: "pixel-usb", latencySeed: 11 }, ...Array.from({ length: PHONES_AT_ONCE }, () => ({}))], adbPort: adb.port });
  const log = createLogger({ level: "error" });
  const server = { host: "127.0.0.1", port: adb.port };
  const database = openAgentDb(join(dir.path, "agent.db"));
  const watcher = new DeviceWatcher({ adb: createAdbClient(server), server, log });
  let hostJournal: ReturnType<typeof openHostJournalDb> | undefined;
  try {
    const serial = (sim.devices[0] as { serial: string }).serial;
    const usbSerial = (sim.devices[1] as { serial: string }).serial;
    watcher.start();
    const crowd = sim.devices.slice(2).map((d) => d.serial);
    while ([serial, usbSerial, ...crowd].some((s) => !watcher.device(s))) await new Promise((r) => setTimeout(r, 20));
    await import("node:fs/promises").then((fs) => fs.mkdir(join(dir.path, "locks"), { recursive: true }));
    hostJournal = openHostJournalDb(join(dir.path, "locks"));
    const journal = new OwnershipJournal(hostJournal.db, hostJournal.sqlite);
    const ownership = new DeviceOwnership({ lockDir: join(dir.path, "locks"), journal, watcher, history: new DeviceHistory(database.db), agentId: "bench" });
    const setprop = setPropAction(new DeviceJobs(server, (p) => journal.unresolvedIds(p)));

    // Interleaved so both see the same machine noise.
    const measure = async (serial: string, n: number) => {
      const bare: number[] = [];
      const owned: number[] = [];
      // Both meet the same phone delays: reseeded alike before each (see DeviceLatency).
      const latency = sim.devices.find((d) => d.serial === serial)?.device.state.latency;
      for (let i = 0; i < n + 10; i++) {
        latency?.reseed(200 + i);
        let t0 = performance.now();
        const r = await shellV2(server, serial, `setprop persist.bench.v ${i}`);
        if (r.exitCode !== 0) throw new Error("bare setprop failed");
        const b = performance.now() - t0;
        latency?.reseed(200 + i);
        t0 = performance.now();
        await ownership.run(setprop, { key: "persist.bench.v", value: String(i) }, { serial, deadlineMs: Date.now() + 10_000, requestedBy: "bench" });
        const o = performance.now() - t0;
        if (i >= 10) {
          bare.push(b);
          owned.push(o);
        }
      }
      return { bare, owned };
    };
    const { bare, owned } = await measure(serial, N);
    const usb = await measure(usbSerial, NR);

    // Ownership with nothing to dispatch: its own overhead, without the device.
    const noop = {
      kind: "noop",
      journalRequest: () => ({}),
      dispatch: async () => ({ result: {}, receipt: {} }),
      prove: async () => undefined,
    };
    const overhead: number[] = [];
    for (let i = 0; i < N; i++) {
      const t1 = performance.now();
      await ownership.run(noop, {}, { serial, deadlineMs: Date.now() + 10_000, requestedBy: "bench" });
      overhead.push(performance.now() - t1);
    }

    // The same, once the phone's settled history fills the journal's per-device bound
    // (as on a phone a lab has used for weeks): history must not slow its actions.
    const physicalId = watcher.device(serial)?.identity.physicalId ?? "";
    const rows = Math.ceil(JOURNAL_BYTES_PER_DEVICE / HISTORY_ROW_BYTES);
    const fill = hostJournal.sqlite.prepare(
      "INSERT INTO actions (action_id, physical_id, serial, agent_id, kind, request_sha256, request_json, state, dispatched, boot_id, created_at, deadline_at, settled_at, size) VALUES (?, ?, ?, 'bench', 'setprop', '', ?, 'settled', 1, 'b', ?, ?, ?, ?)",
    );
    const oldest = Date.now() - rows;
    hostJournal.sqlite.transaction(() => {
      for (let i = 0; i < rows; i++) fill.run(randomUUID(), physicalId, serial, "x".repeat(HISTORY_ROW_BYTES - 512), oldest + i, oldest + i, oldest + i, HISTORY_ROW_BYTES);
    })();
    // A new journal object, so its per-device byte count is read from the table as at start.
    const full = new DeviceOwnership({ lockDir: join(dir.path, "locks"), journal: new OwnershipJournal(hostJournal.db, hostJournal.sqlite), watcher, history: new DeviceHistory(database.db), agentId: "bench" });
    const overheadFull: number[] = [];
    for (let i = 0; i < N; i++) {
      const t1 = performance.now();
      await full.run(noop, {}, { serial, deadlineMs: Date.now() + 10_000, requestedBy: "bench" });
      overheadFull.push(performance.now() - t1);
    }

    // Many phones of one agent at once (a lab host): ownership alone on each, all in parallel.
    // Each durable commit is an fsync on the agent's event loop: it holds every other phone meanwhile.
    const crowdLatency: number[] = [];
    let crowdActions = 0;
    const crowdStart = performance.now();
    await Promise.all(
      crowd.map(async (s) => {
        while (performance.now() - crowdStart < 2_000) {
          const t1 = performance.now();
          await ownership.run(noop, {}, { serial: s, deadlineMs: Date.now() + 10_000, requestedBy: "bench" });
          crowdLatency.push(performance.now() - t1);
          crowdActions++;
        }
      }),
    );
    const crowdPerSecond = crowdActions / ((performance.now() - crowdStart) / 1000);
    const onePerSecond = 1000 / median(overhead);

    // Journal commits alone: begin (fsync'd) + settle.
    let commits = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < 2_000) {
      const a = journal.begin({ physicalId: "pd-bench", serial: "s", kind: "setprop", request: { key: "k", value: String(commits) }, bootId: "b", deadlineAt: Date.now() + 1000, requestedBy: "bench" });
      journal.settle(a.actionId, { exitCode: 0 }, "completed");
      commits += 2;
    }
    const commitsPerSecond = commits / ((performance.now() - t0) / 1000);

    const mb = median(bare);
    const mo = median(owned);
    const report = {
      actions: N,
      bareShellMedianMs: Number(mb.toFixed(3)),
      ownedActionMedianMs: Number(mo.toFixed(3)),
      ownedP90Ms: Number(percentile(owned, 90).toFixed(3)),
      ratio: Number((mo / mb).toFixed(3)),
      addedMsPerAction: Number((mo - mb).toFixed(3)),
      journalCommitsPerSecond: Math.round(commitsPerSecond),
      ownershipOnlyMedianMs: Number(median(overhead).toFixed(3)),
      ownershipOnlyFullHistoryMedianMs: Number(median(overheadFull).toFixed(3)),
      fullHistoryRows: rows,
      phonesAtOnce: PHONES_AT_ONCE,
      phonesAtOnceActionsPerSecond: Math.round(crowdPerSecond),
      phonesAtOnceMedianMs: round(median(crowdLatency), 3),
    };
    console.log(`ownership cost over ${N} setprop actions on a simulated phone`);
    console.log(`  bare adb shell round trip   median ${mb.toFixed(2)} ms`);
    console.log(`  with lock + journal         median ${mo.toFixed(2)} ms  (ratio ${(mo / mb).toFixed(3)}, +${(mo - mb).toFixed(2)} ms)`);
    console.log(`  ownership alone (no device) median ${median(overhead).toFixed(2)} ms per action (lock, 2 journal commits, release)`);
    console.log(`  ownership alone, history at its bound (${rows} settled rows) median ${median(overheadFull).toFixed(2)} ms (${(median(overheadFull) / median(overhead)).toFixed(2)}x the fresh journal)`);
    console.log(
      `  ${PHONES_AT_ONCE} phones at once, ownership alone: ${Math.round(crowdPerSecond)} actions/s (${(crowdPerSecond / onePerSecond).toFixed(2)}x one phone's ${Math.round(onePerSecond)}), median ${median(crowdLatency).toFixed(2)} ms`,
    );
    console.log(`  journal commits per second  ${Math.round(commitsPerSecond)} (synchronous=FULL, WAL)`);
    const usbRatio = median(usb.owned) / median(usb.bare);
    console.log(`  pixel-usb: bare ${median(usb.bare).toFixed(1)} ms, owned ${median(usb.owned).toFixed(1)} ms (ratio ${usbRatio.toFixed(3)}, target <= 1.1)`);
    emitReport(
      "ownership-cost",
      [
        { measure: "journaled setprop vs bare shell", instant: addedMs(mo - mb), realistic: round(usbRatio, 2), profile: "pixel-usb", target: "<= 1.1x (pixel-usb)", pass: usbRatio <= 1.1 },
        { measure: "  ownership alone (lock, 2 commits, release)", instant: ms(median(overhead)), realistic: null, target: "", pass: null },
        { measure: "  ownership alone, history at its per-device bound", instant: ms(median(overheadFull)), realistic: null, target: "", pass: null },
        { measure: `  ${PHONES_AT_ONCE} phones at once: actions/s over one phone's`, instant: String(round(crowdPerSecond / onePerSecond, 2)), realistic: null, target: "", pass: null },
        { measure: "  journal commits per second", instant: String(Math.round(commitsPerSecond)), realistic: null, target: "", pass: null },
      ],
      { ...report, pixelUsb: { bareShellMedianMs: round(median(usb.bare), 2), ownedActionMedianMs: round(median(usb.owned), 2), ratio: round(usbRatio, 3) } },
    );
  } finally {
    watcher.stop();
    database.close();
    hostJournal?.close();
    await sim.stop();
    await adb.stop();
    await dir.remove();
  }
}

await main();
process.exit(0);
