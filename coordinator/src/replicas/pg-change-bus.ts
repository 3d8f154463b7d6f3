import { EventEmitter } from "node:events";
import pg from "pg";
import type { Logger } from "@farm/shared/log";
import { CHANGE_KINDS, type Change, type ChangeBus, type ChangeKind } from "./change-bus.js";

const CHANNEL = "farm_changes";
const KINDS: ReadonlySet<string> = new Set<ChangeKind>(CHANGE_KINDS);
// At most this many notices in one statement (each its own NOTIFY, each under the 8000-byte cap).
const NOTICES_PER_STATEMENT = 16;

/** `SELECT pg_notify($1, $2), pg_notify($1, $3), …` for n notices on channel $1. */
function notifyText(n: number): string {
  return `SELECT ${Array.from({ length: n }, (_, i) => `pg_notify($1, $${i + 2})`).join(", ")}`;
}

/** A notice waiting to be sent; `leaseId`: a lease notice carrying its row, which a later one for that lease replaces. */
interface Pending {
  payload: string;
  resolve: () => void;
  reject: (err: Error) => void;
  leaseId: string | undefined;
}

/**
 * Change notices over PostgreSQL LISTEN/NOTIFY: one listening connection per
 * replica, notices sent on the pool. PostgreSQL delivers notices in commit
 * order, so one replica's changes to one row arrive in the order made. A
 * lost connection is re-opened with backoff and followed by a resync, since
 * notices sent meanwhile are gone.
 */
export class PgChangeBus implements ChangeBus {
  readonly events = new EventEmitter<{ change: [change: Change]; resync: [] }>();
  private client: pg.Client | undefined;
  private closed = false;
  private readonly outbox: Pending[] = [];
  /** The lease notice waiting in the outbox for each lease id (not yet on its way). */
  private readonly pendingLease = new Map<string, Pending>();
  private sending = false;
  private retryMs = 100;

  private constructor(
    private readonly url: string,
    private readonly pool: pg.Pool,
    private readonly replicaId: string,
    private readonly log: Logger,
  ) {}

  static async open(url: string, pool: pg.Pool, replicaId: string, log: Logger): Promise<PgChangeBus> {
    const bus = new PgChangeBus(url, pool, replicaId, log);
    await bus.listen();
    return bus;
  }

  async publish(kind: ChangeKind, id: string, data?: unknown): Promise<void> {
    // Ids are short (uuids, serials, names, activity ids, "<session uuid>/<seq>") and data is a lease row
    // (about 400 bytes); a notice stays far under PostgreSQL's 8000-byte cap.
    const payload = JSON.stringify(data === undefined ? { k: kind, i: id, f: this.replicaId } : { k: kind, i: id, f: this.replicaId, d: data });
    return new Promise((resolve, reject) => {
      const pending: Pending = { payload, resolve, reject, leaseId: undefined };
      if (kind === "lease" && data !== undefined) {
        // A lease notice carries the whole row as committed: a later one (its release, a renewal) says all
        // an earlier one still waiting here would, so that one is not sent. It goes, and this one is
        // queued last, so it still follows whatever was published between the two (a cleanup's row, say).
        const superseded = this.pendingLease.get(id);
        const at = superseded ? this.outbox.indexOf(superseded) : -1;
        if (superseded && at >= 0) {
          this.outbox.splice(at, 1);
          pending.resolve = () => {
            superseded.resolve();
            resolve();
          };
          pending.reject = (err) => {
            superseded.reject(err);
            reject(err);
          };
        }
        pending.leaseId = id;
        this.pendingLease.set(id, pending);
      }
      this.outbox.push(pending);
      if (!this.sending) void this.send();
    });
  }

  /**
   * Sends what is waiting, one statement at a time: notices published while
   * one is on its way go together in the next (one `pg_notify` each, so every
   * receiver reads them as single notices), in the order published. Busy
   * replicas send one statement for several changes instead of one each.
   */
  private async send(): Promise<void> {
    this.sending = true;
    while (this.outbox.length > 0) {
      const batch = this.outbox.splice(0, NOTICES_PER_STATEMENT);
      for (const n of batch) if (n.leaseId !== undefined && this.pendingLease.get(n.leaseId) === n) this.pendingLease.delete(n.leaseId);
      try {
        await this.pool.query({ name: `farm_notify_${batch.length}`, text: notifyText(batch.length), values: [CHANNEL, ...batch.map((n) => n.payload)] });
        for (const n of batch) n.resolve();
      } catch (err) {
        for (const n of batch) n.reject(err as Error);
      }
    }
    this.sending = false;
  }

  async close(): Promise<void> {
    this.closed = true;
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => undefined);
  }

  private async listen(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url, application_name: `farm-listen-${this.replicaId.slice(0, 8)}` });
    client.on("notification", (n) => this.deliver(n.payload));
    client.on("error", (err) => this.lost(client, err));
    client.on("end", () => this.lost(client, new Error("connection ended")));
    await client.connect();
    await client.query(`LISTEN ${CHANNEL}`);
    this.client = client;
    this.retryMs = 100;
  }

  private deliver(payload: string | undefined): void {
    let parsed: { k?: unknown; i?: unknown; f?: unknown; d?: unknown };
    try {
      parsed = JSON.parse(payload ?? "") as typeof parsed;
    } catch {
      return;
    }
    if (typeof parsed.k !== "string" || !KINDS.has(parsed.k) || typeof parsed.i !== "string" || typeof parsed.f !== "string") return;
    if (parsed.f === this.replicaId) return;
    this.events.emit("change", { kind: parsed.k as ChangeKind, id: parsed.i, from: parsed.f, ...(parsed.d === undefined ? {} : { data: parsed.d }) });
  }

  private lost(client: pg.Client, err: Error): void {
    if (this.client !== client || this.closed) return;
    this.client = undefined;
    this.log.warn("lost the database's change notices; reconnecting", { error: err.message });
    void client.end().catch(() => undefined);
    const retry = () => {
      if (this.closed) return;
      this.listen().then(
        () => {
          this.log.info("change notices back; re-reading shared state");
          this.events.emit("resync");
        },
        (e: Error) => {
          this.retryMs = Math.min(this.retryMs * 2, 5_000);
          this.log.warn("change notices still down", { error: e.message, retryInMs: this.retryMs });
          setTimeout(retry, this.retryMs).unref();
        },
      );
    };
    setTimeout(retry, this.retryMs).unref();
  }
}
