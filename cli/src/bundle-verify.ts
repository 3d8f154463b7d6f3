import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { manifestSchemaErrors } from "@farm/shared/evidence-manifest-validate";
import { sha256File } from "@farm/shared/verified-file";

export interface VerifyReport {
  ok: boolean;
  evidenceId: string | null;
  status: string | null;
  checked: number;
  problems: string[];
}

/**
 * Offline check of a bundle directory: the manifest parses and matches
 * schema version 1, and every artifact it lists exists with exactly the
 * recorded size and sha256.
 */
export async function verifyBundle(dir: string): Promise<VerifyReport> {
  const problems: string[] = [];
  let manifest: EvidenceManifest;
  try {
    manifest = JSON.parse(await readFile(join(dir, "manifest.json"), "utf8")) as EvidenceManifest;
  } catch (err) {
    return { ok: false, evidenceId: null, status: null, checked: 0, problems: [`manifest.json: ${(err as Error).message}`] };
  }
  problems.push(...manifestSchemaErrors(manifest).map((p) => `manifest.json: ${p}`));
  let checked = 0;
  for (const a of Array.isArray(manifest.artifacts) ? manifest.artifacts : []) {
    if (a.path === null || typeof a.path !== "string") continue;
    if (!/^[A-Za-z0-9._-]+$/.test(a.path)) {
      problems.push(`${a.path}: not a plain bundle file name`);
      continue;
    }
    const file = join(dir, a.path);
    try {
      const s = await stat(file);
      if (s.size !== a.bytes) problems.push(`${a.path}: ${s.size} bytes, manifest says ${a.bytes}`);
      const sha = await sha256File(file);
      if (sha !== a.sha256) problems.push(`${a.path}: sha256 ${sha}, manifest says ${a.sha256}`);
      checked++;
    } catch (err) {
      problems.push(`${a.path}: ${(err as NodeJS.ErrnoException).code === "ENOENT" ? "missing" : (err as Error).message}`);
    }
  }
  return { ok: problems.length === 0, evidenceId: manifest.evidenceId ?? null, status: manifest.status ?? null, checked, problems };
}
