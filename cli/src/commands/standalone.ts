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
import { adbPortSource, adbServerAddress } from "../adb-address.js";
import { parseByteSize } from "../byte-size.js";
import { untilStopped } from "../service-run.js";
import { readCleanupPolicy } from "../cleanup-policy-file.js";
import type { standaloneOptions } from "../tree/service-commands.js";
import type { Action } from "../tree/spec.js";

/** `farm standalone`: coordinator and agent in one process, on loopback only. */
export const runStandalone: Action<typeof standaloneOptions> = async ({ opts, sources, ctx }) => {
  const listen = parseListenAddress(opts.listen ?? "127.0.0.1:7420");
  if (!isLocalOnlyHost(listen.host)) {
    throw invalidArgument("listen", "standalone serves loopback only; run `farm coordinator` to serve a network");
  }
  const dataDir = opts.dataDir ?? defaultFarmHome(ctx.env);
  const heartbeatIntervalMs = opts.heartbeatInterval ?? 5_000;
  const adb = adbServerAddress(opts);
  const cleanupPolicy = opts.cleanup === undefined ? undefined : await readCleanupPolicy(opts.cleanup);
  const coordinator = await startCoordinator({
    ...(cleanupPolicy ? { cleanupPolicy } : {}),
    listen,
    dataDir: join(dataDir, "coordinator"),
    ...(opts.evidenceQuota !== undefined ? { evidenceQuotaBytes: parseByteSize(opts.evidenceQuota, "evidence-quota") } : {}),
    ...(opts.capturesPerUser !== undefined ? { capturesPerUser: opts.capturesPerUser } : {}),
  });
  const adminTokenFile = join(dataDir, standaloneFiles.adminToken);
  const agentTokenFile = join(dataDir, standaloneFiles.agentToken);
  await ensureTokenFile(coordinator.tokens, adminTokenFile, { baseName: "admin", kind: "user", role: "admin" });
  await ensureTokenFile(coordinator.tokens, agentTokenFile, { baseName: "standalone-agent", kind: "agent", role: null });
  const agent = await startAgent({
    coordinatorUrl: coordinator.url,
    token: readFileSync(agentTokenFile, "utf8").trim(),
    dataDir: join(dataDir, "agent"),
    adb,
    adbPortSource: adbPortSource(sources.adbPort),
    heartbeatIntervalMs,
    startAdbServer: !opts.noAdbStart,
    ...(opts.lockDir ? { lockDir: opts.lockDir } : {}),
  });
  const addressFile = join(dataDir, standaloneFiles.address);
  await writePrivateFile(addressFile, JSON.stringify({ url: coordinator.url, pid: process.pid }) + "\n");
  ctx.printer.result({ url: coordinator.url, dataDir, adminTokenFile, agentId: agent.id }, () => [`farm standalone serving on ${coordinator.url}`, `data dir: ${dataDir}`, `adb server: ${adb.host}:${adb.port}`].join("\n"));
  await untilStopped(ctx.stopSignal);
  await agent.close();
  await coordinator.close();
  await rm(addressFile, { force: true });
  return 0;
};
