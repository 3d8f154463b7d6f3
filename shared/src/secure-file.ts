import { randomBytes } from "node:crypto";
import { chmodSync, closeSync, openSync } from "node:fs";
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
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
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

/**
 * Makes a SQLite database file (and its -wal/-shm/-journal, if present)
 * private before SQLite opens it: SQLite creates those companions with the
 * main file's mode, so a 0600 main file keeps every one of them 0600. Files
 * an older version left readable are tightened too.
 */
export function preparePrivateDbFile(file: string): void {
  if (file === ":memory:" || file === "") return;
  closeSync(openSync(file, "a", 0o600));
  for (const f of [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]) {
    try {
      chmodSync(f, 0o600);
    } catch {
      // Companions appear with the first write, already private.
    }
  }
}
