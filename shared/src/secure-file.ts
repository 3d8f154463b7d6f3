import { mkdir, open, rename, chmod } from "node:fs/promises";
import { dirname } from "node:path";

/** Creates a directory only its owner can enter (0700). */
export async function ensurePrivateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  // mkdir's mode is filtered by the umask and ignored for existing dirs.
  await chmod(dir, 0o700);
}

/**
 * Writes a file atomically with mode 0600: temp file, fsync, rename. Readers
 * see the old content or the new, never a torn write.
 */
export async function writePrivateFile(path: string, data: string | Uint8Array): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.tmp-${process.pid}-${Date.now()}`;
  const fh = await open(tmp, "w", 0o600);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await chmod(tmp, 0o600);
  await rename(tmp, path);
}
