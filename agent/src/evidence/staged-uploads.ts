import { readdir, readFile, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Transport } from "@connectrpc/connect";
import { toErrorReport } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { uploadBundle } from "./evidence-upload.js";

/**
 * Bundles left in staging by an agent that stopped before its upload
 * finished. Those with a manifest are whole and are uploaded again, so
 * captured evidence reaches the store (`farm evidence list`) even though the
 * caller of the original capture was told it failed. Directories without a
 * manifest were never finished and are left for inspection.
 */
export async function resumeStagedUploads(deps: { stagingDir: string; transport: Transport; agentId: string; log: Logger }): Promise<number> {
  let names: string[];
  try {
    names = await readdir(deps.stagingDir);
  } catch {
    return 0;
  }
  let uploaded = 0;
  for (const name of names) {
    const dir = join(deps.stagingDir, name);
    if (!/^[0-9a-f-]{36}$/.test(name) || !(await stat(dir)).isDirectory()) continue;
    let manifest: EvidenceManifest;
    try {
      manifest = JSON.parse(await readFile(join(dir, "manifest.json"), "utf8")) as EvidenceManifest;
    } catch {
      continue;
    }
    const files = manifest.artifacts.map((a) => a.path).filter((p): p is string => p !== null);
    try {
      await uploadBundle(deps.transport, {
        evidenceId: manifest.evidenceId,
        agentId: deps.agentId,
        serial: manifest.device.serial,
        physicalId: manifest.device.physicalId ?? "",
        kind: manifest.kind,
        dir,
        files,
      });
      await rm(dir, { recursive: true, force: true });
      uploaded++;
      deps.log.info("staged evidence uploaded after a restart", { evidenceId: manifest.evidenceId });
    } catch (err) {
      const r = toErrorReport(err);
      // Already stored (an earlier attempt got through): the staged copy is redundant.
      if (r.code === "ALREADY_EXISTS") await rm(dir, { recursive: true, force: true });
      else deps.log.warn("staged evidence upload failed; will retry on the next attach", { evidenceId: manifest.evidenceId, code: r.code });
    }
  }
  return uploaded;
}
