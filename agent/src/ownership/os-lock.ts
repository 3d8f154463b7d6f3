import Database from "better-sqlite3";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";

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

  private constructor(
    readonly file: string,
    db: Database.Database,
  ) {
    this.db = db;
  }

  /** Takes the lock if it is free; undefined if someone holds it. */
  static tryAcquire(file: string, holder: Record<string, unknown>): OsLock | undefined {
    let db = OsLock.idle.get(file);
    OsLock.idle.delete(file);
    const fresh = db === undefined;
    db ??= new Database(file, { timeout: 0 });
    // Lock and holder files are private (0600). By chmod, never by opening the
    // file: closing any descriptor of it would drop the POSIX locks this
    // process holds on it through another connection.
    if (fresh) chmodSync(file, 0o600);
    try {
      // Rollback-journal mode: BEGIN EXCLUSIVE takes the file lock at once.
      if (fresh) db.pragma("journal_mode = DELETE");
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
    writeFileSync(holderFile(file), JSON.stringify({ ...holder, pid: process.pid, since: new Date().toISOString() }) + "\n", { mode: 0o600 });
    // The mode above applies only when the file is created; one left readable by an older version is tightened once.
    if (fresh) chmodSync(holderFile(file), 0o600);
    return lock;
  }

  /** Polls (without blocking the event loop) until acquired or the deadline. */
  static async acquire(file: string, holder: Record<string, unknown>, deadlineMs: number, pollMs = 25): Promise<OsLock | undefined> {
    for (;;) {
      const lock = OsLock.tryAcquire(file, holder);
      if (lock) return lock;
      if (Date.now() + pollMs > deadlineMs) return undefined;
      await new Promise((r) => setTimeout(r, pollMs));
    }
  }

  /** Whether some process holds the lock right now (probes, never waits). */
  static isHeld(file: string): boolean {
    const probe = OsLock.tryAcquire(file, {});
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
  }
}

function holderFile(lockFile: string): string {
  return `${lockFile}.holder.json`;
}
