import { createReadStream } from "node:fs";
import { rm, stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { renameDurably } from "@farm/shared/durable-file";
import { Errors, farmError } from "@farm/shared/errors";
import { ensurePrivateDir } from "@farm/shared/secure-file";
import type { ByteRange, ByteStore, StoredFile } from "./byte-store.js";
import { checkKey } from "./key.js";

/**
 * Files under the data dir (0700 directories, 0600 files), at the paths
 * their keys name. Replicas can share it on a mount every one of them sees.
 */
export class FileByteStore implements ByteStore {
  readonly kind = "files";

  constructor(readonly root: string) {}

  path(key: string): string {
    return join(this.root, checkKey(key));
  }

  async adopt(key: string, file: string, _meta: StoredFile): Promise<void> {
    const to = this.path(key);
    try {
      if (await this.sizeOf(key) !== undefined) return;
      await ensurePrivateDir(dirname(to));
      // Published only whole, and the name survives a crash.
      await renameDurably(file, to);
    } finally {
      await rm(file, { force: true });
    }
  }

  async adoptDir(prefix: string, dir: string, _files: ReadonlyMap<string, StoredFile>): Promise<void> {
    const to = this.path(prefix);
    await ensurePrivateDir(dirname(to));
    // What an adopt cut short (a crash before the caller indexed it) is replaced.
    await rm(to, { recursive: true, force: true });
    await renameDurably(dir, to);
  }

  async sizeOf(key: string): Promise<number | undefined> {
    const s = await stat(this.path(key)).catch(() => undefined);
    return s?.isFile() ? s.size : undefined;
  }

  async *read(key: string, range?: ByteRange): AsyncGenerator<Uint8Array> {
    const file = this.path(key);
    if ((await this.sizeOf(key)) === undefined) throw farmError(Errors.NOT_FOUND, `no stored file ${key}`, "key");
    if (range && range.end <= range.start) return;
    const opts = range ? { start: range.start, end: range.end - 1, highWaterMark: 256 * 1024 } : { highWaterMark: 256 * 1024 };
    for await (const chunk of createReadStream(file, opts)) yield chunk as Buffer;
  }

  async remove(key: string): Promise<void> {
    await rm(this.path(key), { force: true });
  }

  async removeUnder(prefix: string): Promise<void> {
    await rm(this.path(prefix), { recursive: true, force: true });
  }
}
