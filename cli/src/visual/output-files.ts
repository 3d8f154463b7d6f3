import { mkdir, open, rm } from "node:fs/promises";
import { join, resolve } from "node:path";

/**
 * Writes `farm assert visual`'s NAME.actual.png and NAME.diff.png into
 * the directory the caller named (--output-dir), owner-only: a directory
 * it creates is 0700, each file 0600 (an existing one is made so before it
 * is rewritten). A screen may show anything (a typed password, a user's
 * data): only its owner reads it. A diff of a screen that now matches is
 * removed, so no stale one sits next to the new actual screen.
 */
export async function writeVisualFiles(outputDir: string, stem: string, actual: Uint8Array, diff: Uint8Array | undefined): Promise<{ actualFile: string; diffFile?: string }> {
  const dir = resolve(outputDir);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const actualFile = join(dir, `${stem}.actual.png`);
  await writeOwnerOnly(actualFile, actual);
  const diffFile = join(dir, `${stem}.diff.png`);
  if (!diff) {
    await rm(diffFile, { force: true });
    return { actualFile };
  }
  await writeOwnerOnly(diffFile, diff);
  return { actualFile, diffFile };
}

async function writeOwnerOnly(file: string, bytes: Uint8Array): Promise<void> {
  const f = await open(file, "w", 0o600);
  try {
    // The mode given to open() applies only to a file it creates.
    await f.chmod(0o600);
    await f.writeFile(bytes);
  } finally {
    await f.close();
  }
}
