import Database from "better-sqlite3";
import { chmodSync, closeSync, constants, fstatSync, openSync, readFileSync, writeSync } from "node:fs";

/**
 * An exclusive lock held by the operating system: an EXCLUSIVE transaction
 * on a small SQLite file, which takes a POSIX record lock on it. The kernel
 * drops the lock when the holding process dies, so a crashed holder can
 * never leave it stuck, and a live holder can never lose it to a timeout:
 * there is no age, no heartbeat, no stealing. SQLite's own bookkeeping makes
 * it exclusive between connections of one process too.
 */
export class OsLock {
  private db: Database.Database | undefined;
  /**
   * Idle connections by lock file, reused so taking a lock costs one BEGIN
   * rather than opening a database. An idle connection holds no lock.
   */
  private static readonly idle = new Map<string, Database.Database>();
  /** Open holder files by lock file, so recording a holder is one write. */
  private static readonly holders = new Map<string, { fd: number; length: number }>();

  private constructor(
    readonly file: string,
    db: Database.Database,
  ) {
    this.db = db;
  }

  /** Takes the lock if it is free; undefined if someone holds it. */
  static tryAcquire(file: string, holder: Record<string, unknown>): OsLock | undefined {
    return OsLock.take(file, holder);
  }

  /** Takes the lock; records a holder unless `holder` is undefined (a probe). */
  private static take(file: string, holder: Record<string, unknown> | undefined): OsLock | undefined {
    let db = OsLock.idle.get(file);
    OsLock.idle.delete(file);
    const fresh = db === undefined;
    db ??= new Database(file, { timeout: 0 });
    // Lock and holder files are private (0600). By chmod, never by opening the
    // file: closing any descriptor of it would drop the POSIX locks this
    // process holds on it through another connection.
    if (fresh) chmodSync(file, 0o600);
    try {
      // A rollback journal kept in memory: BEGIN EXCLUSIVE takes the file lock
      // at once, as in DELETE mode, without creating and unlinking a journal
      // file each time (ext4 metadata work: 0.2-0.4 ms of every action and
      // status probe, over 1 ms when the disk was busy). Nothing is ever
      // written here to roll back.
      if (fresh) db.pragma("journal_mode = MEMORY");
      db.exec("BEGIN EXCLUSIVE");
    } catch (err) {
      if ((err as { code?: string }).code === "SQLITE_BUSY" && !fresh) {
        OsLock.idle.set(file, db);
        return undefined;
      }
      db.close();
      if ((err as { code?: string }).code === "SQLITE_BUSY") return undefined;
      throw err;
    }
    const lock = new OsLock(file, db);
    // Who holds it, for status output only: never used to judge the lock.
    if (holder) OsLock.recordHolder(file, JSON.stringify({ ...holder, pid: process.pid, since: new Date().toISOString() }));
    return lock;
  }

  /** Polls (without blocking the event loop) until acquired, the deadline, or the signal aborts. */
  static async acquire(file: string, holder: Record<string, unknown>, deadlineMs: number, pollMs = 25, signal?: AbortSignal): Promise<OsLock | undefined> {
    for (;;) {
      // Undefined once the signal aborts, as at the deadline: the caller says why.
      if (signal?.aborted) return undefined;
      const lock = OsLock.tryAcquire(file, holder);
      if (lock) return lock;
      if (Date.now() + pollMs > deadlineMs) return undefined;
      await new Promise((r) => setTimeout(r, pollMs));
    }
  }

  /** Whether some process holds the lock right now (probes, never waits). */
  static isHeld(file: string): boolean {
    const probe = OsLock.take(file, undefined);
    if (!probe) return true;
    probe.release();
    return false;
  }

  /** The holder record written by the current holder, if any. */
  static holder(file: string): Record<string, unknown> | undefined {
    try {
      return JSON.parse(readFileSync(holderFile(file), "utf8")) as Record<string, unknown>;
    } catch {
      return undefined;
    }
  }

  get held(): boolean {
    return this.db !== undefined;
  }

  release(): void {
    const db = this.db;
    if (!db) return;
    this.db = undefined;
    // The holder file is left for the next holder to overwrite: it is only
    // read while the lock is held, and removing it costs every action time.
    db.exec("ROLLBACK");
    const other = OsLock.idle.get(this.file);
    if (other) other.close();
    OsLock.idle.set(this.file, db);
  }

  /** Closes idle connections (at shutdown; held locks are not affected). */
  static closeIdle(): void {
    for (const db of OsLock.idle.values()) db.close();
    OsLock.idle.clear();
    for (const h of OsLock.holders.values()) closeSync(h.fd);
    OsLock.holders.clear();
  }

  /**
   * Overwrites the holder file in place, padded with spaces to its previous
   * length (JSON ignores them). Never truncated: on ext4, truncating a file
   * and writing it again forces its blocks to disk at close, which cost each
   * action about a millisecond.
   */
  private static recordHolder(file: string, json: string): void {
    let h = OsLock.holders.get(file);
    if (!h) {
      // Read-write, created if missing, never truncated (and not O_APPEND, which would ignore the offset).
      const fd = openSync(holderFile(file), constants.O_RDWR | constants.O_CREAT, 0o600);
      // The mode above applies only when the file is created; one left readable by an older version is tightened once.
      chmodSync(holderFile(file), 0o600);
      h = { fd, length: fstatSync(fd).size };
      OsLock.holders.set(file, h);
    }
    const text = json + "\n";
    const bytes = Buffer.from(text.length < h.length ? text.padEnd(h.length, " ") : text);
    writeSync(h.fd, bytes, 0, bytes.length, 0);
    h.length = Math.max(h.length, bytes.length);
  }
}

function holderFile(lockFile: string): string {
  return `${lockFile}.holder.json`;
}
