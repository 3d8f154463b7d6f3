/**
 * Where files live, in the same run: the database byte store (1 MiB chunks
 * in PostgreSQL, what replicas use by default) against files under the data
 * dir (one coordinator's default). For one file of --mib MiB:
 *  - taking it in (a checked local file handed to the store), MiB/s;
 *  - reading it whole, MiB/s, and how much the process's RSS grew meanwhile
 *    (a reader holds one chunk, whatever the file's size);
 *  - the median latency of a 256 KiB range from the middle (a video seek on
 *    the dashboard), --ranges times.
 * PostgreSQL is a private cluster with its default durability (fsync on).
 *
 *   node test/dist/bench/byte-store.js [--mib 128] [--ranges 50]
 */
import { createHash, randomBytes } from "node:crypto";
import { open } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import pg from "pg";
import { type ByteStore } from "@farm/coordinator/bytes/byte-store";
import { openPostgres } from "@farm/coordinator/db/open-postgres";
import { postgresDatabase, sqliteDatabase } from "@farm/coordinator/db/database";
import { startPgCluster } from "../support/pg-cluster.js";
import { makeTempDir } from "../support/temp-dir.js";
import { median } from "./proc-stats.js";
import { emitReport } from "./bench-report.js";
import { createByteStore } from "@farm/coordinator/db/stores";

const { values } = parseArgs({ options: { mib: { type: "string", default: "128" }, ranges: { type: "string", default: "50" } } });
const MIB = Number(values.mib);
const RANGES = Number(values.ranges);
const RANGE_BYTES = 256 * 1024;

/** A file of random bytes (written a MiB at a time) and its sha256. */
async function makeFile(path: string): Promise<{ size: number; sha256: string }> {
  const hash = createHash("sha256");
  const fh = await open(path, "w", 0o600);
  try {
    for (let i = 0; i < MIB; i++) {
      const chunk = randomBytes(1024 * 1024);
      hash.update(chunk);
      await fh.write(chunk);
    }
  } finally {
    await fh.close();
  }
  return { size: MIB * 1024 * 1024, sha256: hash.digest("hex") };
}

interface Figures {
  adoptMiBs: number;
  readMiBs: number;
  readRssGrowthMiB: number;
  rangeMedianMs: number;
}

async function measure(store: ByteStore, work: string, name: string): Promise<Figures> {
  const file = join(work, `${name}.bin`);
  const meta = await makeFile(file);
  const key = `evidence/00000000-0000-4000-8000-00000000000${name === "files" ? 1 : 2}/video.mp4`;
  let t = performance.now();
  await store.adopt(key, file, meta);
  const adoptS = (performance.now() - t) / 1000;
  global.gc?.();
  const rssBefore = process.memoryUsage().rss;
  let peak = rssBefore;
  const hash = createHash("sha256");
  t = performance.now();
  for await (const chunk of store.read(key)) {
    hash.update(chunk);
    peak = Math.max(peak, process.memoryUsage().rss);
  }
  const readS = (performance.now() - t) / 1000;
  if (hash.digest("hex") !== meta.sha256) throw new Error(`${name}: the bytes read back differ from those stored`);
  const times: number[] = [];
  for (let i = 0; i < RANGES; i++) {
    const start = Math.floor(meta.size / 2) + i * 4096;
    t = performance.now();
    let got = 0;
    for await (const chunk of store.read(key, { start, end: start + RANGE_BYTES })) got += chunk.length;
    times.push(performance.now() - t);
    if (got !== RANGE_BYTES) throw new Error(`${name}: a range read gave ${got} bytes`);
  }
  return { adoptMiBs: MIB / adoptS, readMiBs: MIB / readS, readRssGrowthMiB: (peak - rssBefore) / (1024 * 1024), rangeMedianMs: median(times) };
}

async function main(): Promise<void> {
  const dir = await makeTempDir("bench-bytes");
  const cluster = await startPgCluster();
  try {
    const admin = new pg.Client({ connectionString: cluster.url });
    await admin.connect();
    await admin.query("CREATE DATABASE farm_bytes");
    await admin.end();
    const database = postgresDatabase(await openPostgres(cluster.url.replace(/\/postgres$/, "/farm_bytes")));
    const lone = sqliteDatabase(":memory:");
    try {
      const files = await measure(createByteStore("files", join(dir.path, "data"), lone), dir.path, "files");
      const db = await measure(createByteStore("database", join(dir.path, "data"), database), dir.path, "database");
      const row = (what: string, f: number, d: number, unit: string, better: "higher" | "lower") =>
        console.log(`${what.padEnd(34)} files ${f.toFixed(1).padStart(8)} ${unit}   database ${d.toFixed(1).padStart(8)} ${unit}   database/files ${(d / f).toFixed(2)} (${better} is better)`);
      console.log(`byte store, one ${MIB} MiB file (PostgreSQL fsync on)`);
      // The files store takes a staged file in by renaming it: its figure is the rename, not a copy.
      row("take in (files: a rename)", files.adoptMiBs, db.adoptMiBs, "MiB/s", "higher");
      row("read whole", files.readMiBs, db.readMiBs, "MiB/s", "higher");
      row("RSS growth while reading", files.readRssGrowthMiB, db.readRssGrowthMiB, "MiB", "lower");
      row(`256 KiB range, median of ${RANGES}`, files.rangeMedianMs, db.rangeMedianMs, "ms", "lower");
      emitReport(
        "byte-store",
        [
          { measure: `byte store read ${MIB} MiB, database / files`, instant: `${(db.readMiBs / files.readMiBs).toFixed(2)}x (${db.readMiBs.toFixed(0)} MiB/s)`, realistic: null, target: "", pass: null },
          { measure: "  256 KiB range, database / files", instant: `${db.rangeMedianMs.toFixed(1)} / ${files.rangeMedianMs.toFixed(1)} ms`, realistic: null, target: "", pass: null },
        ],
        { files, database: db },
      );
    } finally {
      await database.close();
      await lone.close();
    }
  } finally {
    await cluster.stop();
    await dir.remove();
  }
}

await main();
