import type { PackageManifest } from "./package-manager.js";

/**
 * devsim's stand-in for an APK: a magic line plus the JSON manifest. Real
 * APKs (zip + binary XML) are refused by the simulated `pm install` with the
 * parse error a phone gives for a file it cannot read.
 */
const MAGIC = "DEVSIM-APK 1\n";

export function buildSimApk(manifest: PackageManifest): Buffer {
  return Buffer.from(`${MAGIC}${JSON.stringify(manifest)}\n`);
}

export function parseSimApk(bytes: Buffer): PackageManifest | undefined {
  const text = bytes.toString("utf8");
  if (!text.startsWith(MAGIC)) return undefined;
  try {
    const manifest = JSON.parse(text.slice(MAGIC.length)) as PackageManifest;
    return typeof manifest.name === "string" && /^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$/.test(manifest.name) ? manifest : undefined;
  } catch {
    return undefined;
  }
}
