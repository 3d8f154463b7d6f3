import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { readChunks, sha256File, VerifiedFileWriter } from "./verified-file.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-vf-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const data = Buffer.from("hello verified world");
const expected = { size: data.length, sha256: createHash("sha256").update(data).digest("hex") };

describe("VerifiedFileWriter", () => {
  it("accepts exactly the announced bytes, private and new", async () => {
    const w = await VerifiedFileWriter.create(join(dir, "a"), expected);
    expect(await w.write(data.subarray(0, 5))).toBe(true);
    expect(await w.write(data.subarray(5))).toBe(true);
    expect(await w.finish()).toEqual({ ok: true, ...expected });
    expect((await stat(join(dir, "a"))).mode & 0o777).toBe(0o600);
    expect(await sha256File(join(dir, "a"))).toBe(expected.sha256);
    const chunks: Uint8Array[] = [];
    for await (const c of readChunks(join(dir, "a"), 4)) chunks.push(c);
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
    expect(chunks.every((c) => c.length <= 4)).toBe(true);
    await expect(VerifiedFileWriter.create(join(dir, "a"), expected)).rejects.toThrow(/EEXIST/);
  });

  it("refuses bytes past the announced size and reports short or altered files", async () => {
    const over = await VerifiedFileWriter.create(join(dir, "b"), expected);
    expect(await over.write(Buffer.concat([data, Buffer.from("!")]))).toBe(false);
    await over.abort();
    expect((await readFile(join(dir, "b"))).length).toBe(0);
    const short = await VerifiedFileWriter.create(join(dir, "c"), expected);
    await short.write(data.subarray(1));
    expect((await short.finish()).ok).toBe(false);
    const altered = await VerifiedFileWriter.create(join(dir, "d"), expected);
    await altered.write(Buffer.from(data.toString().toUpperCase()));
    expect((await altered.finish()).ok).toBe(false);
  });
});
