import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { FarmDatabase } from "../db/database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import { FileSummaryKeyStore, SUMMARY_KEY_BYTES, SUMMARY_KEY_FILE, SummaryKey } from "./summary-key.js";
import { createSummaryKeyStore } from "../db/stores.js";

// Every dir a test made (the start-race test makes 50), all removed after it.
const dirs: string[] = [];
let opened: FarmDatabase | undefined;
afterEach(async () => {
  await opened?.close();
  opened = undefined;
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});

async function dataDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "summary-key-"));
  dirs.push(dir);
  return dir;
}

const pins = Array.from({ length: 10_000 }, (_, i) => String(i).padStart(4, "0"));
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

describe("SummaryKey", () => {
  it("summarises a 4-digit PIN so that no plain sha256 over 0000-9999 matches it", async () => {
    const key = await SummaryKey.open(new FileSummaryKeyStore(await dataDir()));
    const plain = new Set(pins.map(sha256));
    const summaries = pins.map((p) => key.summarize(p));
    expect(summaries.filter((s) => plain.has(s))).toEqual([]);
    // Still a summary: the same text gives the same one, different texts differ.
    expect(key.summarize("4711")).toBe(summaries[4711]);
    expect(new Set(summaries).size).toBe(10_000);
  });

  it("creates its key file 0600 beside the database, 32 bytes, and reads the same key at the next start", async () => {
    const d = await dataDir();
    const first = await SummaryKey.open(new FileSummaryKeyStore(d));
    const file = join(d, SUMMARY_KEY_FILE);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await readFile(file)).length).toBe(SUMMARY_KEY_BYTES);
    const again = await SummaryKey.open(new FileSummaryKeyStore(d));
    expect(again.summarize("1234")).toBe(first.summarize("1234"));
    // Another data dir is another farm: another key.
    const other = await SummaryKey.open(new FileSummaryKeyStore(await mkdtemp(join(d, "other-"))));
    expect(other.summarize("1234")).not.toBe(first.summarize("1234"));
  });

  it("agrees on one key when two coordinators start on one data dir at once (never reads a key file still being written)", async () => {
    // The race is between one start's create and its write: many rounds make it show.
    for (let round = 0; round < 50; round++) {
      const d = await dataDir();
      const [a, b] = await Promise.all([SummaryKey.open(new FileSummaryKeyStore(d)), SummaryKey.open(new FileSummaryKeyStore(d))]);
      expect(a.summarize("0000")).toBe(b.summarize("0000"));
      expect(await readdir(d)).toEqual([SUMMARY_KEY_FILE]);
    }
  });

  it("refuses a key file that is not a key, rather than summarising with it", async () => {
    const d = await dataDir();
    await writeFile(join(d, SUMMARY_KEY_FILE), "short", { mode: 0o600 });
    await expect(SummaryKey.open(new FileSummaryKeyStore(d))).rejects.toThrow(/not a summary key/);
  });
});

describe.each(dialects)("SummaryKey on %s", (dialect) => {
  it("changes every summary on rotation, keeps the new key (0600) and gives it to the next start", async () => {
    const d = await dataDir();
    opened = await openTestDatabase(dialect);
    const key = await SummaryKey.open(createSummaryKeyStore(opened, d));
    const before = key.summarize("1234");
    await key.rotate();
    const after = key.summarize("1234");
    expect(after).not.toBe(before);
    expect((await SummaryKey.open(createSummaryKeyStore(opened, d))).summarize("1234")).toBe(after);
    if (dialect === "sqlite") expect((await stat(join(d, SUMMARY_KEY_FILE))).mode & 0o777).toBe(0o600);
  });

  it("gives replicas sharing the database one key, and the rotated one once they re-read it", async () => {
    opened = await openTestDatabase(dialect);
    // On SQLite replicas do not exist; two coordinators on one data dir stand in for them.
    const d = await dataDir();
    const [a, b] = await Promise.all([SummaryKey.open(createSummaryKeyStore(opened, d)), SummaryKey.open(createSummaryKeyStore(opened, d))]);
    expect(a.summarize("0000")).toBe(b.summarize("0000"));
    await a.rotate();
    expect(b.summarize("0000")).not.toBe(a.summarize("0000"));
    await b.reload();
    expect(b.summarize("0000")).toBe(a.summarize("0000"));
  });
});
