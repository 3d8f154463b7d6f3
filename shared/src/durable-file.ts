import { randomBytes } from "node:crypto";
import { open, rename, rm, type FileHandle } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { writeAll } from "./verified-file.js";

/** errno codes that mean "the disk could not keep these bytes", not a bug (ESHORTWRITE: verified-file's ShortWriteError). */
const STORAGE_CODES = new Set(["ENOSPC", "EDQUOT", "EFBIG", "EIO", "EROFS", "ESHORTWRITE"]);

/** True for failures of the storage itself (full, quota, I/O error, read-only, short write). */
export function isStorageError(err: unknown): err is NodeJS.ErrnoException {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return typeof code === "string" && STORAGE_CODES.has(code);
}

/** Makes a directory's entries (a create, a rename) survive a crash. */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Renames and then syncs the directory (or directories) the name moved between. */
export async function renameDurably(from: string, to: string): Promise<void> {
  await rename(from, to);
  await fsyncDir(dirname(to));
  if (dirname(from) !== dirname(to)) await fsyncDir(dirname(from));
}

/**
 * Publishes a file whole or not at all: written under a temporary name
 * (mode 0600), every byte checked, fsync'd, renamed to its final name, and
 * the directory fsync'd. On any failure the temporary file is removed and
 * nothing exists under the final name that was not there before.
 */
export async function writeFileDurably(path: string, data: string | Uint8Array): Promise<void> {
  const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : data;
  const tmp = join(dirname(path), `.${basename(path)}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`);
  let fh: FileHandle | undefined;
  try {
    fh = await open(tmp, "wx", 0o600);
    await writeAll(fh, bytes, path);
    await fh.sync();
    await fh.close();
    fh = undefined;
    await renameDurably(tmp, path);
  } catch (err) {
    await fh?.close().catch(() => undefined);
    await rm(tmp, { force: true }).catch(() => undefined);
    throw err;
  }
}
