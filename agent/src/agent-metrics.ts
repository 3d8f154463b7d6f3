import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Counter, Gauge, Registry as MetricsRegistry } from "prom-client";
import type { ListenAddress } from "@farm/shared/listen-address";
import type { DeviceHistory } from "./devices/device-history.js";
import type { DeviceWatcher } from "./devices/device-watcher.js";

export interface AgentMetrics {
  /** Counts one finished command. */
  command(kind: string, outcome: string): void;
  /** Counts one adb service a remote adb tunnel refused, by the rule that refused it. */
  adbServiceRefused(rule: string): void;
  /** Serves GET /metrics on the address; resolves to its URL. */
  listen(addr: ListenAddress): Promise<string>;
  close(): Promise<void>;
}

/** The agent's Prometheus series, served only when an address is configured. */
/** What remote adb holds on this agent now. */
export interface AdbStreamGauges {
  openStreams(): number;
  /** Bytes the streams hold against the agent's budget now, and the most they ever held. */
  heldBytes(): number;
  peakHeldBytes(): number;
}

export function agentMetrics(src: { watcher: DeviceWatcher; draining: () => boolean; videoWorkers: () => Promise<number>; history: DeviceHistory; adb?: AdbStreamGauges }): AgentMetrics {
  const registry = new MetricsRegistry();
  new Gauge({
    name: "farm_agent_devices",
    help: "adb serials on this agent by state",
    labelNames: ["state"],
    registers: [registry],
    collect() {
      this.reset();
      for (const d of src.watcher.snapshot()) this.inc({ state: d.state });
    },
  });
  const commands = new Counter({ name: "farm_agent_commands_total", help: "Commands run by this agent, by command and outcome", labelNames: ["command", "outcome"], registers: [registry] });
  const refused = new Counter({ name: "farm_agent_adb_services_refused_total", help: "adb services remote adb tunnels refused before they reached a phone, by rule", labelNames: ["rule"], registers: [registry] });
  const lost = new Counter({ name: "farm_agent_history_write_failures_total", help: "Device history events that could not be written (the outcome stood), by kind", labelNames: ["kind"], registers: [registry] });
  src.history.onRecordFailure((kind) => lost.inc({ kind }));
  new Gauge({
    name: "farm_agent_draining",
    help: "1 while the agent drains",
    registers: [registry],
    collect() {
      this.set(src.draining() ? 1 : 0);
    },
  });
  new Gauge({
    name: "farm_agent_video_workers",
    help: "Recording workers with a live heartbeat",
    registers: [registry],
    async collect() {
      this.set(await src.videoWorkers());
    },
  });
  const adb = src.adb;
  if (adb) {
    const gauge = (name: string, help: string, read: () => number) =>
      new Gauge({
        name,
        help,
        registers: [registry],
        collect() {
          this.set(read());
        },
      });
    gauge("farm_agent_adb_streams", "Remote adb streams open on this agent", () => adb.openStreams());
    gauge("farm_agent_adb_held_bytes", "Bytes remote adb streams hold on this agent now (bounded by --adb-agent-budget)", () => adb.heldBytes());
    gauge("farm_agent_adb_held_peak_bytes", "The most bytes remote adb streams ever held on this agent at once", () => adb.peakHeldBytes());
  }
  let server: Server | undefined;
  return {
    command: (kind, outcome) => commands.inc({ command: kind, outcome }),
    adbServiceRefused: (rule) => refused.inc({ rule }),
    async listen(addr) {
      server = createServer((req, res) => {
        if (req.method !== "GET" || (req.url ?? "").split("?")[0] !== "/metrics") {
          res.writeHead(404).end("not found\n");
          return;
        }
        void registry.metrics().then((text) => res.writeHead(200, { "content-type": registry.contentType }).end(text));
      });
      const s = server;
      await new Promise<void>((resolve, reject) => {
        s.once("error", reject);
        s.listen(addr.port, addr.host, () => resolve());
      });
      const a = s.address() as AddressInfo;
      return `http://${a.family === "IPv6" ? `[${a.address}]` : a.address}:${a.port}/metrics`;
    },
    close: () => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())),
  };
}
