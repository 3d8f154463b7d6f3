import { join } from "node:path";
import { parseListenAddress } from "@farm/shared/listen-address";
import { defaultFarmHome } from "@farm/shared/paths";
import { startCoordinator } from "@farm/coordinator/coordinator";
import { ensureTokenFile } from "@farm/coordinator/bootstrap-token";
import { intFlag, parseFlags, stringFlag } from "../args.js";
import type { Command } from "../command.js";
import { untilStopped } from "../service-run.js";

export const coordinatorCommand: Command = {
  name: "coordinator",
  summary: "Run the coordinator service",
  usage: "farm coordinator [--listen HOST:PORT] [--data-dir DIR] [--heartbeat-misses N]",
  options: {
    listen: { type: "string" },
    "data-dir": { type: "string" },
    "heartbeat-misses": { type: "string" },
    help: { type: "boolean", short: "h" },
  },
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const listen = parseListenAddress(stringFlag(parsed, "listen") ?? "127.0.0.1:7420");
    const dataDir = stringFlag(parsed, "data-dir") ?? join(defaultFarmHome(ctx.env), "coordinator");
    const heartbeatMisses = intFlag(parsed, "heartbeat-misses", 1, 100) ?? 3;
    const coordinator = await startCoordinator({ listen, dataDir, heartbeatMisses });
    // First start: an admin token so the operator can create the others.
    const adminTokenFile = join(dataDir, "admin.token");
    if (coordinator.tokens.count() === 0) {
      await ensureTokenFile(coordinator.tokens, adminTokenFile, { baseName: "admin", kind: "user", admin: true });
    }
    ctx.printer.result({ url: coordinator.url, dataDir, adminTokenFile }, () =>
      [`coordinator listening on ${coordinator.url}`, `data dir: ${dataDir}`, `admin token (first start): ${adminTokenFile}`].join("\n"),
    );
    await untilStopped(ctx.stopSignal);
    await coordinator.close();
    return 0;
  },
};
