import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { readdir, readFile, rm, stat, statfs, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isStorageError, writeFileDurably } from "./durable-file.js";

// A real full disk: a tiny tmpfs (needs root, as the farm's test machines run).
const root = process.getuid?.() === 0;
let dir = "";

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "farm-durable-"));
  if (root) execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", dir]);
});

afterAll(async () => {
  if (root) execFileSync("umount", ["-l", dir]);
  await rm(dir, { recursive: true, force: true });
});

describe.skipIf(!root)("writeFileDurably on a full disk", () => {
  it("publishes a file that fits, whole and 0600", async () => {
    const path = join(dir, "fits.json");
    await writeFileDurably(path, "{\"ok\":true}\n");
    expect(await readFile(path, "utf8")).toBe("{\"ok\":true}\n");
    expect((await stat(path)).mode & 0o777).toBe(0o600);
  });

  it("fails with a storage error when the bytes do not fit, leaving no file under the name and no temporary file", async () => {
    const s = await statfs(dir);
    // More than is free: the kernel takes part of it (a short write), then refuses the rest.
    const bytes = Buffer.alloc(s.bavail * s.bsize + 16 * 1024, 1);
    const path = join(dir, "too-big.bin");
    const err = await writeFileDurably(path, bytes).then(() => undefined, (e: unknown) => e);
    expect(err).toBeDefined();
    expect(isStorageError(err)).toBe(true);
    expect((await readdir(dir)).sort()).toEqual(["fits.json"]);
  });

  it("never replaces an existing file with a truncated one", async () => {
    const path = join(dir, "fits.json");
    const filler = join(dir, "filler");
    const s = await statfs(dir);
    await writeFile(filler, Buffer.alloc(Math.max(0, s.bavail * s.bsize - 4096)));
    await expect(writeFileDurably(path, Buffer.alloc(64 * 1024, 2))).rejects.toThrow(/ENOSPC|short write/);
    expect(await readFile(path, "utf8")).toBe("{\"ok\":true}\n");
    await rm(filler);
  });
});
