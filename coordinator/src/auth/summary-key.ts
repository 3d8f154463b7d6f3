import { createHmac, randomBytes } from "node:crypto";
import { link, open, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { writePrivateFile } from "@farm/shared/secure-file";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { summaryKey } from "../db/pg-schema.js";

/** Bytes of a summary key: 256 random bits. */
export const SUMMARY_KEY_BYTES = 32;

/** The file of the key beside the SQLite database, in the data dir. */
export const SUMMARY_KEY_FILE = "summary.key";

/** Summarises a value someone may not read: equal values give equal summaries, and no one without the key can test a guess. */
export interface Summarizer {
  /** HMAC-SHA256 of the text under the coordinator's key, as hex. */
  summarize(text: string): string;
}

/** Where a coordinator's key is kept. */
export interface SummaryKeyStore {
  /** The key, made (32 random bytes) and kept when there is none yet; concurrent first reads agree on one. */
  readOrCreate(): Promise<Buffer>;
  /** Replaces the key with `key`. */
  replace(key: Buffer): Promise<void>;
}

/**
 * The coordinator's key for summaries of redacted values (typed text, shell
 * commands, property values), shown to viewers in their place. A plain
 * sha256 of a 4-digit PIN is reversed by trying all 10,000; an HMAC is not
 * without the key, which never leaves the coordinator (never logged, never
 * sent). Rotating it makes every summary from then on a new one.
 */
export class SummaryKey implements Summarizer {
  private constructor(
    private readonly store: SummaryKeyStore,
    private key: Buffer,
  ) {}

  static async open(store: SummaryKeyStore): Promise<SummaryKey> {
    return new SummaryKey(store, await store.readOrCreate());
  }

  summarize(text: string): string {
    return createHmac("sha256", this.key).update(text, "utf8").digest("hex");
  }

  /** A new random key, kept; summaries made from now on use it. */
  async rotate(): Promise<void> {
    const key = randomBytes(SUMMARY_KEY_BYTES);
    await this.store.replace(key);
    this.key = key;
  }

  /** Reads the kept key again (another replica rotated it). */
  async reload(): Promise<void> {
    this.key = await this.store.readOrCreate();
  }
}

/**
 * The key of a coordinator on SQLite: <data-dir>/summary.key, 0600, beside
 * the database. It is not in the database, so a copy of the database (a
 * backup, a bug report) does not carry it.
 */
export class FileSummaryKeyStore implements SummaryKeyStore {
  readonly file: string;

  constructor(dataDir: string) {
    this.file = join(dataDir, SUMMARY_KEY_FILE);
  }

  async readOrCreate(): Promise<Buffer> {
    const fresh = randomBytes(SUMMARY_KEY_BYTES);
    // Written whole to a private name, then linked in place (link fails if the
    // key exists): of two first starts, one key wins, and neither ever reads a
    // key file the other has created but not yet written.
    const tmp = `${this.file}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
    try {
      const fh = await open(tmp, "wx", 0o600);
      try {
        await fh.writeFile(fresh);
        await fh.sync();
      } finally {
        await fh.close();
      }
      await link(tmp, this.file);
      return fresh;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    } finally {
      await rm(tmp, { force: true });
    }
    const key = await readFile(this.file);
    if (key.length !== SUMMARY_KEY_BYTES) throw new Error(`${this.file} is not a summary key (${key.length} bytes, not ${SUMMARY_KEY_BYTES}); remove it to make a new one`);
    return key;
  }

  async replace(key: Buffer): Promise<void> {
    await writePrivateFile(this.file, key);
  }
}

/**
 * The key of replicas on PostgreSQL: one row of the shared database, since
 * replicas share it and not a data dir. The database already holds what is
 * summarised (the activity log's and the steps' text), so the key there
 * exposes nothing its reader could not read already.
 */
export class PgSummaryKeyStore implements SummaryKeyStore {
  constructor(private readonly db: PgCoordinatorDb) {}

  async readOrCreate(): Promise<Buffer> {
    // Replicas starting together: the first insert wins, every one reads it.
    await this.db.insert(summaryKey).values({ id: 1, key: randomBytes(SUMMARY_KEY_BYTES), rotatedAt: Date.now() }).onConflictDoNothing();
    const [row] = await this.db.select({ key: summaryKey.key }).from(summaryKey).where(eq(summaryKey.id, 1));
    if (!row) throw new Error("the summary key was not written");
    return row.key;
  }

  async replace(key: Buffer): Promise<void> {
    await this.db
      .insert(summaryKey)
      .values({ id: 1, key, rotatedAt: Date.now() })
      .onConflictDoUpdate({ target: summaryKey.id, set: { key, rotatedAt: Date.now() } });
  }
}
