import { createHash, randomUUID } from "node:crypto";
import { and, asc, desc, eq, inArray, sql } from "drizzle-orm";
import type { AgentDb } from "./db/open-agent-db.js";
import { actions } from "./db/schema.js";

export type ActionState = "pending" | "settled" | "not_dispatched" | "unknown" | "abandoned";
export type ActionRow = typeof actions.$inferSelect;

/** Default bound of retained history per physical device. */
export const JOURNAL_BYTES_PER_DEVICE = 4 * 1024 * 1024;

export interface NewAction {
  physicalId: string;
  serial: string;
  kind: string;
  request: Record<string, unknown>;
  bootId: string;
  deadlineAt: number;
  requestedBy: string;
}

/**
 * The ownership journal. Each mutating action is committed (fsync'd, see
 * open-agent-db.ts) as "pending" before it is dispatched, then moved to its
 * outcome. "pending" found at start-up and "unknown" are unresolved: they
 * block further mutations of that physical device until reconciled by proof
 * or abandoned by an admin. Settled history is bounded per device; unresolved
 * records are never dropped.
 */
export class OwnershipJournal {
  constructor(
    private readonly db: AgentDb,
    private readonly maxBytesPerDevice = JOURNAL_BYTES_PER_DEVICE,
  ) {}

  /** Marks actions left pending by a previous process as unknown. */
  recoverAfterRestart(): number {
    const r = this.db
      .update(actions)
      .set({ state: "unknown", ambiguous: true, errorMessage: "the agent stopped while this action was in flight" })
      .where(eq(actions.state, "pending"))
      .run();
    return r.changes;
  }

  begin(a: NewAction): ActionRow {
    const requestJson = canonicalJson(a.request);
    const row: ActionRow = {
      actionId: randomUUID(),
      physicalId: a.physicalId,
      serial: a.serial,
      kind: a.kind,
      requestSha256: createHash("sha256").update(requestJson).digest("hex"),
      requestJson,
      state: "pending",
      dispatched: null,
      ambiguous: false,
      bootId: a.bootId,
      createdAt: Date.now(),
      deadlineAt: a.deadlineAt,
      settledAt: null,
      receiptJson: "",
      settledBy: "",
      abandonReason: "",
      abandonedBy: "",
      errorMessage: "",
      requestedBy: a.requestedBy,
      size: 0,
    };
    row.size = approximateSize(row);
    this.db.insert(actions).values(row).run();
    this.prune(a.physicalId);
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
    return this.db
      .select()
      .from(actions)
      .where(and(eq(actions.physicalId, physicalId), inArray(actions.state, ["pending", "unknown"])))
      .orderBy(asc(actions.createdAt))
      .all();
  }

  recent(physicalId: string, limit = 20): ActionRow[] {
    return this.db.select().from(actions).where(eq(actions.physicalId, physicalId)).orderBy(desc(actions.createdAt)).limit(limit).all();
  }

  private update(actionId: string, set: Partial<ActionRow>): ActionRow {
    const row = this.db.update(actions).set(set).where(eq(actions.actionId, actionId)).returning().get();
    if (!row) throw new Error(`no journal entry ${actionId}`);
    return row;
  }

  /** Drops the oldest settled history beyond the per-device bound. */
  private prune(physicalId: string): void {
    const total = this.db
      .select({ bytes: sql<number>`coalesce(sum(${actions.size}), 0)` })
      .from(actions)
      .where(eq(actions.physicalId, physicalId))
      .get();
    let excess = (total?.bytes ?? 0) - this.maxBytesPerDevice;
    if (excess <= 0) return;
    const oldest = this.db
      .select({ actionId: actions.actionId, size: actions.size })
      .from(actions)
      .where(and(eq(actions.physicalId, physicalId), inArray(actions.state, ["settled", "not_dispatched", "abandoned"])))
      .orderBy(asc(actions.createdAt))
      .all();
    const drop: string[] = [];
    for (const o of oldest) {
      if (excess <= 0) break;
      drop.push(o.actionId);
      excess -= o.size;
    }
    if (drop.length > 0) this.db.delete(actions).where(inArray(actions.actionId, drop)).run();
  }
}

/** JSON with sorted keys, so equal requests hash equally. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

function approximateSize(row: ActionRow): number {
  // Receipts are added later and bounded by the action kinds themselves.
  return 512 + row.requestJson.length + row.receiptJson.length;
}
