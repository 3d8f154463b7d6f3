import { createHmac, randomBytes, randomUUID } from "node:crypto";
import type Database from "better-sqlite3";
import { canonicalJson } from "@farm/shared/canonical-json";
import type { Statement } from "better-sqlite3";
import { eq, getTableColumns, inArray } from "drizzle-orm";
import { journalActions as actions, OPEN_STATES, type HostJournalDb } from "../db/host-journal-db.js";

export type ActionState = "pending" | "settled" | "not_dispatched" | "unknown" | "abandoned";
export type ActionRow = typeof actions.$inferSelect;

/** Default bound of retained history per physical device. */
export const JOURNAL_BYTES_PER_DEVICE = 4 * 1024 * 1024;

export interface NewAction {
  physicalId: string;
  agentId?: string;
  serial: string;
  kind: string;
  request: Record<string, unknown>;
  bootId: string;
  deadlineAt: number;
  requestedBy: string;
}

/** Unresolved entries of one device (through the partial index actions_open). */
const OPEN = `physical_id = ? AND ${OPEN_STATES}`;

/** The reads every action makes, by name (their query plans are tested). */
export const JOURNAL_QUERIES = {
  unresolvedIds: `SELECT action_id FROM actions WHERE ${OPEN} ORDER BY created_at`,
  unknownIds: `SELECT action_id FROM actions WHERE ${OPEN} AND state = 'unknown' ORDER BY created_at`,
  unresolvedRows: `SELECT * FROM actions WHERE ${OPEN} ORDER BY created_at`,
} as const;

/**
 * The ownership journal of a host (see host-journal-db.ts), shared by every
 * agent process that uses the same lock dir. Each mutating action is
 * committed (fsync'd) as "pending" before it is dispatched, then moved to its
 * outcome. "pending" and "unknown" are unresolved: they block further
 * mutations of that physical device, from any agent of the host, until
 * reconciled by proof or abandoned by an admin. Nothing is cached in memory:
 * another process may change the journal at any time. Settled history is
 * bounded per device; unresolved records are never dropped.
 */
export class OwnershipJournal {
  /**
   * Keys each request's hash. The hash goes on the phone with a device job
   * (its .job and .done records) and into ownership status; a plain sha256
   * of a typed PIN or a short command is reversed by hashing guesses. It is
   * only ever compared as stored, never recomputed, so a key of this
   * process, never kept, serves every process sharing the journal.
   */
  private readonly requestKey = randomBytes(32);
  private readonly bytes = new Map<string, number>();
  private readonly statements = new Map<string, Statement>();
  private readonly unresolvedStmt: Statement;
  private readonly unknownStmt: Statement;
  // Prepared once: every action reads and writes these on its hot path.
  private readonly unresolvedRowsStmt: Statement;
  private readonly recentStmt: Statement;
  private readonly orphanStmt: Statement;
  private readonly deviceBytesStmt: Statement;
  private readonly oldestSettledStmt: Statement;
  private readonly syncNormal: Statement;
  private readonly syncFull: Statement;

  constructor(
    private readonly db: HostJournalDb,
    private readonly sqlite: Database.Database,
    private readonly maxBytesPerDevice = JOURNAL_BYTES_PER_DEVICE,
  ) {
    this.unresolvedStmt = sqlite.prepare(JOURNAL_QUERIES.unresolvedIds);
    this.unknownStmt = sqlite.prepare(JOURNAL_QUERIES.unknownIds);
    this.unresolvedRowsStmt = sqlite.prepare(JOURNAL_QUERIES.unresolvedRows);
    this.recentStmt = sqlite.prepare("SELECT * FROM actions WHERE physical_id = ? ORDER BY created_at DESC LIMIT ?");
    this.orphanStmt = sqlite.prepare(
      "UPDATE actions SET state = 'unknown', ambiguous = 1, error_message = 'the process dispatching this action stopped before it finished' WHERE state = 'pending' AND physical_id = ?",
    );
    this.deviceBytesStmt = sqlite.prepare("SELECT coalesce(sum(size), 0) AS bytes FROM actions WHERE physical_id = ?");
    this.oldestSettledStmt = sqlite.prepare("SELECT action_id, size FROM actions WHERE physical_id = ? AND state IN ('settled', 'not_dispatched', 'abandoned') ORDER BY created_at");
    this.syncNormal = sqlite.prepare("PRAGMA synchronous = NORMAL");
    this.syncFull = sqlite.prepare("PRAGMA synchronous = FULL");
  }

  /** True when the device has actions whose outcome is unknown (in this host's journal). */
  hasUnresolved(physicalId: string): boolean {
    return this.unresolvedIds(physicalId).length > 0;
  }

  /** Ids of the device's unresolved actions, oldest first (one indexed read). */
  unresolvedIds(physicalId: string): string[] {
    return (this.unresolvedStmt.all(physicalId) as { action_id: string }[]).map((r) => r.action_id);
  }

  /**
   * Ids of the device's actions whose outcome is known to be unknown (not
   * those in flight right now, which the device lock already guards).
   */
  unknownIds(physicalId: string): string[] {
    return (this.unknownStmt.all(physicalId) as { action_id: string }[]).map((r) => r.action_id);
  }

  /** Unresolved entries of one kind, on any device of the host, oldest first. */
  unresolvedOfKind(kind: string): ActionRow[] {
    return (this.sqlite.prepare(`SELECT * FROM actions WHERE ${OPEN_STATES} AND kind = ? ORDER BY created_at`).all(kind) as Record<string, unknown>[]).map(fromRaw);
  }

  /** Physical ids with actions still "pending". */
  pendingDevices(): string[] {
    return this.db.selectDistinct({ physicalId: actions.physicalId }).from(actions).where(eq(actions.state, "pending")).all().map((r) => r.physicalId);
  }

  /**
   * Marks the device's "pending" actions as unknown. Only called while
   * holding the device's lock: a pending entry is only written under it, so
   * any left when the lock is ours belong to a process that died mid-action.
   */
  orphanPending(physicalId: string): number {
    return this.orphanStmt.run(physicalId).changes;
  }

  /** Copies entries from an older journal (the agent's data dir) once; known ids are kept as they are. */
  importLegacy(rows: Omit<ActionRow, "agentId" | "progressJson">[], agentId: string): number {
    let n = 0;
    this.sqlite.transaction(() => {
      for (const r of rows) {
        n += this.db.insert(actions).values({ ...r, agentId, progressJson: "" }).onConflictDoNothing().run().changes;
      }
    })();
    return n;
  }

  /** Records what a dispatch has observed so far (kept for reconcile's proof). */
  progress(actionId: string, progress: Record<string, unknown>): void {
    this.update(actionId, { progressJson: JSON.stringify(progress) });
  }

  begin(a: NewAction): ActionRow {
    const requestJson = canonicalJson(a.request);
    const row: ActionRow = {
      actionId: randomUUID(),
      physicalId: a.physicalId,
      serial: a.serial,
      agentId: a.agentId ?? "",
      kind: a.kind,
      requestSha256: createHmac("sha256", this.requestKey).update(requestJson).digest("hex"),
      requestJson,
      state: "pending",
      dispatched: null,
      ambiguous: false,
      bootId: a.bootId,
      createdAt: Date.now(),
      deadlineAt: a.deadlineAt,
      settledAt: null,
      progressJson: "",
      receiptJson: "",
      settledBy: "",
      abandonReason: "",
      abandonedBy: "",
      errorMessage: "",
      requestedBy: a.requestedBy,
      size: 0,
    };
    row.size = approximateSize(row);
    // Durable before dispatch: this commit is fsync'd (synchronous=FULL).
    this.insertStatement().run(...insertColumns.map(([prop]) => toSql(row[prop])));
    this.prune(a.physicalId, row.size);
    return row;
  }

  settle(actionId: string, receipt: Record<string, unknown>, settledBy: "completed" | "reconciled"): ActionRow {
    return this.update(actionId, {
      state: "settled",
      dispatched: 1,
      ambiguous: false,
      settledAt: Date.now(),
      receiptJson: JSON.stringify(receipt),
      settledBy,
    });
  }

  notDispatched(actionId: string, message: string): ActionRow {
    return this.update(actionId, { state: "not_dispatched", dispatched: 0, ambiguous: false, settledAt: Date.now(), errorMessage: message });
  }

  unknown(actionId: string, dispatched: boolean | null, message: string): ActionRow {
    return this.update(actionId, { state: "unknown", dispatched: dispatched === null ? null : dispatched ? 1 : 0, ambiguous: true, errorMessage: message });
  }

  abandon(actionId: string, reason: string, by: string): ActionRow {
    return this.update(actionId, { state: "abandoned", abandonReason: reason, abandonedBy: by, settledAt: Date.now() });
  }

  get(actionId: string): ActionRow | undefined {
    return this.db.select().from(actions).where(eq(actions.actionId, actionId)).get();
  }

  unresolved(physicalId: string): ActionRow[] {
    return (this.unresolvedRowsStmt.all(physicalId) as Record<string, unknown>[]).map(fromRaw);
  }

  recent(physicalId: string, limit = 20): ActionRow[] {
    return (this.recentStmt.all(physicalId, limit) as Record<string, unknown>[]).map(fromRaw);
  }

  private insertStatement(): Statement {
    let stmt = this.statements.get("insert");
    if (!stmt) {
      const names = insertColumns.map(([, column]) => column).join(", ");
      stmt = this.sqlite.prepare(`INSERT INTO actions (${names}) VALUES (${insertColumns.map(() => "?").join(", ")})`);
      this.statements.set("insert", stmt);
    }
    return stmt;
  }

  private update(actionId: string, set: Partial<ActionRow>): ActionRow {
    // An outcome may be committed without its own fsync: if it is lost in a
    // crash, the action reads back as pending and becomes unknown at start,
    // which is safe; the next "pending" commit makes it durable anyway.
    // Prepared statements: this runs on every action's hot path.
    const keys = Object.keys(set).sort() as (keyof ActionRow)[];
    const key = keys.join(",");
    let stmt = this.statements.get(key);
    if (!stmt) {
      const assignments = keys.map((k) => `${actions[k].name} = ?`).join(", ");
      stmt = this.sqlite.prepare(`UPDATE actions SET ${assignments} WHERE action_id = ? RETURNING *`);
      this.statements.set(key, stmt);
    }
    const values = keys.map((k) => toSql(set[k]));
    this.syncNormal.run();
    let raw: Record<string, unknown> | undefined;
    try {
      raw = stmt.get(...values, actionId) as Record<string, unknown> | undefined;
    } finally {
      this.syncFull.run();
    }
    if (!raw) throw new Error(`no journal entry ${actionId}`);
    return fromRaw(raw);
  }

  /**
   * Drops the oldest settled history once a device's entries pass the
   * bound, down to PRUNE_TO of it: pruning (and recounting the bytes after
   * it) is then one action's work in hundreds, not every action's at the bound.
   */
  private prune(physicalId: string, added: number): void {
    let total = this.bytes.get(physicalId);
    if (total === undefined) {
      total = (this.deviceBytesStmt.get(physicalId) as { bytes: number }).bytes;
    } else {
      total += added;
    }
    this.bytes.set(physicalId, total);
    if (total <= this.maxBytesPerDevice) return;
    let excess = total - this.maxBytesPerDevice * PRUNE_TO;
    // Recounted from the table on the next entry: other agents of the host write here too.
    this.bytes.delete(physicalId);
    const drop: string[] = [];
    // Read oldest first only as far as needed; the loop's end closes the cursor before the delete.
    for (const o of this.oldestSettledStmt.iterate(physicalId) as IterableIterator<{ action_id: string; size: number }>) {
      if (excess <= 0) break;
      drop.push(o.action_id);
      excess -= o.size;
    }
    this.sqlite.transaction(() => {
      for (let i = 0; i < drop.length; i += 500) this.db.delete(actions).where(inArray(actions.actionId, drop.slice(i, i + 500))).run();
    })();
  }
}

/** After pruning, a device's entries take at most this share of the bound. */
const PRUNE_TO = 0.9;

const insertColumns = Object.entries(getTableColumns(actions)).map(([prop, column]) => [prop as keyof ActionRow, column.name] as const);

function toSql(v: unknown): unknown {
  return typeof v === "boolean" ? (v ? 1 : 0) : v;
}

/** Maps a raw SQLite row (snake_case columns) onto the drizzle row shape. */
function fromRaw(raw: Record<string, unknown>): ActionRow {
  const out: Record<string, unknown> = {};
  for (const [prop, column] of insertColumns) out[prop] = raw[column];
  out["ambiguous"] = raw["ambiguous"] === 1;
  return out as ActionRow;
}

function approximateSize(row: ActionRow): number {
  // Receipts are added later and bounded by the action kinds themselves.
  return 512 + row.requestJson.length + row.receiptJson.length;
}
