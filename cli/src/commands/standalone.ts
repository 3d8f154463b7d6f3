import { join } from "node:path";
import { rm } from "node:fs/promises";
import { readFileSync } from "node:fs";
import { invalidArgument } from "@farm/shared/errors";
import { isLocalOnlyHost, parseListenAddress } from "@farm/shared/listen-address";
import { defaultFarmHome, standaloneFiles } from "@farm/shared/paths";
import { writePrivateFile } from "@farm/shared/secure-file";
import { startCoordinator } from "@farm/coordinator/coordinator";
import { ensureTokenFile } from "@farm/coordinator/auth/bootstrap-token";
import { startAgent } from "@farm/agent/agent";
import { intFlag, parseFlags, stringFlag } from "../args.js";
import type { Command } from "../command.js";
import { untilStopped } from "../service-run.js";
import { adbServerAddress } from "../adb-address.js";

export const standaloneCommand: Command = {
  name: "standalone",
  summary: "Run coordinator and agent in one process on loopback (single machine)",
  usage: "farm standalone [--listen 127.0.0.1:PORT] [--data-dir DIR] [--adb-host H] [--adb-port N] [--heartbeat-interval MS] [--no-adb-start] [--lock-dir DIR]",
  options: {
    listen: { type: "string" },
    "data-dir": { type: "string" },
    "adb-host": { type: "string" },
    "adb-port": { type: "string" },
    "heartbeat-interval": { type: "string" },
    "no-adb-start": { type: "boolean" },
    "lock-dir": { type: "string" },
    help: { type: "boolean", short: "h" },
  },
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const listen = parseListenAddress(stringFlag(parsed, "listen") ?? "127.0.0.1:7420");
    if (!isLocalOnlyHost(listen.host)) {
      throw invalidArgument("listen", "standalone serves loopback only; run `farm coordinator` to serve a network");
    }
    const dataDir = stringFlag(parsed, "data-dir") ?? defaultFarmHome(ctx.env);
    const heartbeatIntervalMs = intFlag(parsed, "heartbeat-interval", 50, 600_000) ?? 5_000;
    const adb = adbServerAddress(parsed, ctx.env);
    const coordinator = await startCoordinator({ listen, dataDir: join(dataDir, "coordinator") });
    const adminTokenFile = join(dataDir, standaloneFiles.adminToken);
    const agentTokenFile = join(dataDir, standaloneFiles.agentToken);
    await ensureTokenFile(coordinator.tokens, adminTokenFile, { baseName: "admin", kind: "user", role: "admin" });
    await ensureTokenFile(coordinator.tokens, agentTokenFile, { baseName: "standalone-agent", kind: "agent", role: null });
    const agent = await startAgent({
      coordinatorUrl: coordinator.url,
      token: readFileSync(agentTokenFile, "utf8").trim(),
      dataDir: join(dataDir, "agent"),
      adb,
      heartbeatIntervalMs,
      startAdbServer: parsed.values["no-adb-start"] !== true,
      ...(stringFlag(parsed, "lock-dir") ? { lockDir: stringFlag(parsed, "lock-dir") as string } : {}),
    });
    const addressFile = join(dataDir, standaloneFiles.address);
    await writePrivateFile(addressFile, JSON.stringify({ url: coordinator.url, pid: process.pid }) + "\n");
    ctx.printer.result({ url: coordinator.url, dataDir, adminTokenFile, agentId: agent.id }, () =>
      [`farm standalone serving on ${coordinator.url}`, `data dir: ${dataDir}`, `adb server: ${adb.host}:${adb.port}`].join("\n"),
    );
    await untilStopped(ctx.stopSignal);
    await agent.close();
    await coordinator.close();
    await rm(addressFile, { force: true });
    return 0;
  },
};
