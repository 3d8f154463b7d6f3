/**
 * Lease grant + release cycles per second on SQLite with 1,000 devices
 * (100 attached agents x 10 devices, registry and lease manager in process,
 * real database file).
 *
 *   node test/dist/bench/lease-cycles.js [--seconds 3]
 */
import { join } from "node:path";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { create } from "@bufbuild/protobuf";
import { createLogger } from "@farm/shared/log";
import { AgentHelloSchema, DeviceReportSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { openDatabase } from "@farm/coordinator/db/open-database";
import { DeviceLabels } from "@farm/coordinator/devices/device-labels";
import { LeaseManager } from "@farm/coordinator/leases/lease-manager";
import { SqliteLeaseStore } from "@farm/coordinator/leases/sqlite-lease-store";
import { Registry } from "@farm/coordinator/registry/registry";
import { SqliteRegistryStore } from "@farm/coordinator/registry/sqlite-registry-store";
import { makeTempDir } from "../support/temp-dir.js";
import { emitReport, round } from "./bench-report.js";
import { sqliteDatabaseOf } from "@farm/coordinator/db/database";
import { createDeviceLabelStore } from "@farm/coordinator/db/stores";

const { values } = parseArgs({ options: { seconds: { type: "string", default: "3" } } });

async function main(): Promise<void> {
  const dir = await makeTempDir("bench-lease");
  const db = openDatabase(join(dir.path, "coordinator.db"));
  try {
    const registry = await Registry.open(new SqliteRegistryStore(db.db), { heartbeatMisses: 3 });
    const labels = await DeviceLabels.open(createDeviceLabelStore(sqliteDatabaseOf(db.db)));
    const leases = await LeaseManager.open(new SqliteLeaseStore(db.db), registry, labels, createLogger({ level: "error" }));
    // As the coordinator wires them.
    registry.events.on("change", () => leases.kick(leases.dispatch()));
    labels.events.on("changed", () => leases.kick(leases.dispatch()));
    for (let a = 0; a < 100; a++) {
      const id = `agent-${a}`;
      await registry.attach(create(AgentHelloSchema, { agentId: id, name: id, hostname: "h", protocolVersion: 1, agentVersion: "b", heartbeatIntervalMs: 5000 }), { terminate: () => {} });
      await registry.replaceInventory(
        id,
        Array.from({ length: 10 }, (_, d) => create(DeviceReportSchema, { serial: `s-${a}-${d}`, state: "device", properties: { physicalId: `pd-${a}-${d}`, identityStatus: "ok", model: "Pixel 7", apiLevel: 34 } })),
      );
    }
    const signal = new AbortController().signal;
    const hold: { token: string }[] = [];
    // Half the fleet leased, so grants must search past busy devices.
    for (let i = 0; i < 500; i++) hold.push(await leases.acquire("bench", sel({}), { waitMs: 0, ttlMs: 600_000, ticket: "", signal }));
    let cycles = 0;
    const t0 = performance.now();
    const end = t0 + Number(values.seconds) * 1000;
    while (performance.now() < end) {
      const g = await leases.acquire("bench", sel({}), { waitMs: 0, ttlMs: 60_000, ticket: "", signal });
      await leases.release(g.token);
      cycles++;
    }
    const perSecond = cycles / ((performance.now() - t0) / 1000);
    let targeted = 0;
    const t1 = performance.now();
    while (performance.now() < t1 + 1000) {
      const g = await leases.acquire("bench", sel({ physicalId: `pd-99-${targeted % 10}` }), { waitMs: 0, ttlMs: 60_000, ticket: "", signal });
      await leases.release(g.token);
      targeted++;
    }
    console.log(`lease grant + release on SQLite, 1000 devices (500 leased)`);
    console.log(`  any device:          ${Math.round(perSecond)} cycles/s  (ratio to 1000/s target: ${(perSecond / 1000).toFixed(2)})`);
    console.log(`  by physical id:      ${Math.round(targeted / ((performance.now() - t1) / 1000))} cycles/s`);
    emitReport("lease-cycles", [{ measure: "lease grant + release, 1000 devices", instant: `${Math.round(perSecond)}/s`, realistic: null, target: ">= 1000/s", pass: perSecond >= 1000 }], {
      devices: 1000,
      cyclesPerSecond: Math.round(perSecond),
      targetRatio: round(perSecond / 1000, 2),
    });
  } finally {
    db.close();
    await dir.remove();
  }
}

function sel(s: { physicalId?: string }) {
  return { serial: "", physicalId: s.physicalId ?? "", labels: {}, model: "", apiLevelMin: 0, apiLevelMax: 0, agent: "" };
}

await main();
process.exit(0);
