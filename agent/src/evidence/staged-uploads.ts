import { readdir, readFile, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { Code, ConnectError, type Transport } from "@connectrpc/connect";
import { toErrorReport } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { uploadBundle } from "./evidence-upload.js";

export interface StagedUploadDeps {
  stagingDir: string;
  transport: Transport;
  agentId: string;
  log: Logger;
  /** Gives up a bundle's upload after this long without progress (uploadBundle's default if unset). */
  uploadIdleMs?: number;
}

/**
 * Evidence ids this process is capturing or uploading right now. A bundle
 * is never uploaded by two paths at once: the loser of that race would see
 * ALREADY_EXISTS and remove the staged copy the winner is still reading.
 */
export const stagedInFlight = new Set<string>();

/**
 * Bundles left in staging: by an agent that stopped before its upload
 * finished, or by an upload the coordinator refused (its store was full).
 * Those with a manifest are whole and are uploaded again, so captured
 * evidence reaches the store (`farm evidence list`) even though the caller
 * of the original capture was told it failed. Directories without a
 * manifest were never finished and are left for inspection. `pending`
 * counts whole bundles that are still staged and worth another attempt.
 */
export async function resumeStagedUploads(deps: StagedUploadDeps): Promise<{ uploaded: number; pending: number }> {
  let names: string[];
  try {
    names = await readdir(deps.stagingDir);
  } catch {
    return { uploaded: 0, pending: 0 };
  }
  let uploaded = 0;
  let pending = 0;
  for (const name of names) {
    const dir = join(deps.stagingDir, name);
    if (!/^[0-9a-f-]{36}$/.test(name) || stagedInFlight.has(name) || !(await stat(dir).then((s) => s.isDirectory(), () => false))) continue;
    let manifest: EvidenceManifest;
    try {
      manifest = JSON.parse(await readFile(join(dir, "manifest.json"), "utf8")) as EvidenceManifest;
    } catch {
      continue;
    }
    const files = manifest.artifacts.map((a) => a.path).filter((p): p is string => p !== null);
    stagedInFlight.add(name);
    try {
      await uploadBundle(
        deps.transport,
        {
          evidenceId: manifest.evidenceId,
          agentId: deps.agentId,
          serial: manifest.device.serial,
          physicalId: manifest.device.physicalId ?? "",
          kind: manifest.kind,
          dir,
          files,
        },
        undefined,
        deps.uploadIdleMs,
      );
      await rm(dir, { recursive: true, force: true });
      uploaded++;
      deps.log.info("staged evidence uploaded after a restart", { evidenceId: manifest.evidenceId });
    } catch (err) {
      const r = toErrorReport(err);
      // A stored copy of this very bundle was an upload (uploadBundle checks the sha256).
      // Anything else stays staged: a malformed bundle, another manifest stored under
      // this id, or an id the coordinator did not issue will not change by itself.
      const final = [Code.InvalidArgument, Code.AlreadyExists, Code.PermissionDenied].includes(ConnectError.from(err).code);
      if (!final) pending++;
      if (final) deps.log.error("staged evidence refused by the coordinator; it stays staged for an operator", { evidenceId: manifest.evidenceId, code: r.code, error: r.message });
      else deps.log.warn("staged evidence upload failed; it stays staged and is tried again", { evidenceId: manifest.evidenceId, code: r.code });
    } finally {
      stagedInFlight.delete(name);
    }
  }
  return { uploaded, pending };
}
