import { EventEmitter } from "node:events";
import pg from "pg";
import type { Logger } from "@farm/shared/log";
import { CHANGE_KINDS, type Change, type ChangeBus, type ChangeKind } from "./change-bus.js";

const CHANNEL = "farm_changes";
const KINDS: ReadonlySet<string> = new Set<ChangeKind>(CHANGE_KINDS);
// At most this many notices in one statement (each its own NOTIFY, each under the 8000-byte cap).
const NOTICES_PER_STATEMENT = 16;
// Lease rows coalesced into one notice stop short of PostgreSQL's 8000-byte cap (a row is about 400 bytes).
const COALESCED_BYTES = 7_000;

/** `SELECT pg_notify($1, $2), pg_notify($1, $3), …` for n notices on channel $1. */
function notifyText(n: number): string {
  return `SELECT ${Array.from({ length: n }, (_, i) => `pg_notify($1, $${i + 2})`).join(", ")}`;
}

/** A change waiting to be sent; `leaseId`: a lease notice carrying its row, which a later one for that lease replaces. */
interface Pending {
  kind: ChangeKind;
  /** `"i":<id>`, and `"d":<data>` when there is data: the change's part of a notice. */
  fields: string;
  /** The lease row's JSON, for a lease change that carries one (coalesced with its neighbours). */
  row: string | undefined;
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
  /** How a notice of this replica's starts: one it hears back is dropped on this, unparsed. */
  private readonly ownPrefix: string;
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
    private readonly coalesce: boolean,
  ) {
    this.ownPrefix = `{"f":${JSON.stringify(replicaId)},`;
  }

  /**
   * `coalesce` (default): lease changes waiting together go as one notice, and
   * what is published in one turn of the event loop waits for that turn's end.
   * `false`: one notice per change, sent at once (as before; to compare both in one run).
   */
  static async open(url: string, pool: pg.Pool, replicaId: string, log: Logger, opts: { coalesce?: boolean } = {}): Promise<PgChangeBus> {
    const bus = new PgChangeBus(url, pool, replicaId, log, opts.coalesce ?? true);
    await bus.listen();
    return bus;
  }

  async publish(kind: ChangeKind, id: string, data?: unknown): Promise<void> {
    // Ids are short (uuids, serials, names, activity ids, "<session uuid>/<seq>") and data is a lease row
    // (about 400 bytes); a notice stays far under PostgreSQL's 8000-byte cap.
    const row = data === undefined ? undefined : JSON.stringify(data);
    const fields = row === undefined ? `"i":${JSON.stringify(id)}` : `"i":${JSON.stringify(id)},"d":${row}`;
    return new Promise((resolve, reject) => {
      const pending: Pending = { kind, fields, row: kind === "lease" ? row : undefined, resolve, reject, leaseId: undefined };
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
      if (this.sending) return;
      this.sending = true;
      // Coalescing: the rest of this turn's changes (a grant's cleanup row, a waiter's turn) go with this one.
      if (this.coalesce) setImmediate(() => void this.send());
      else void this.send();
    });
  }

  /**
   * The notices for the changes at the outbox's head, at most one statement's
   * worth, and how many changes they carry. A notice starts with its sender
   * (`{"f":…,`) so a receiver can drop its own unparsed. Lease rows next to
   * each other go as one notice, `{"f":…,"k":"lease","i":<first id>,"m":[rows]}`:
   * a replica of the previous version reads it as a lease notice without a
   * row, and re-reads its leases (correct, only slower, for the length of a
   * rolling upgrade).
   */
  private nextNotices(): { payloads: string[]; taken: number } {
    const head = `{"f":${JSON.stringify(this.replicaId)},"k":`;
    const payloads: string[] = [];
    let i = 0;
    while (i < this.outbox.length && payloads.length < NOTICES_PER_STATEMENT) {
      const first = this.outbox[i]!;
      i++;
      if (!this.coalesce || first.row === undefined) {
        payloads.push(`${head}"${first.kind}",${first.fields}}`);
        continue;
      }
      const rows = [first.row];
      let bytes = first.row.length;
      while (i < this.outbox.length) {
        const next = this.outbox[i]!.row;
        if (next === undefined || bytes + next.length > COALESCED_BYTES) break;
        rows.push(next);
        bytes += next.length;
        i++;
      }
      payloads.push(rows.length === 1 ? `${head}"lease",${first.fields}}` : `${head}"lease",${first.fields.slice(0, first.fields.indexOf(",\"d\":"))},"m":[${rows.join(",")}]}`);
    }
    return { payloads, taken: i };
  }

  /**
   * Sends what is waiting, one statement at a time: changes published while
   * one is on its way go together in the next, in the order published, lease
   * rows side by side as one notice (each receiver wakes once for them), the
   * others one `pg_notify` each. Busy replicas send one statement, and fewer
   * notices, for several changes.
   */
  private async send(): Promise<void> {
    this.sending = true;
    while (this.outbox.length > 0) {
      const { payloads, taken } = this.nextNotices();
      const batch = this.outbox.splice(0, taken);
      for (const n of batch) if (n.leaseId !== undefined && this.pendingLease.get(n.leaseId) === n) this.pendingLease.delete(n.leaseId);
      try {
        await this.pool.query({ name: `farm_notify_${payloads.length}`, text: notifyText(payloads.length), values: [CHANNEL, ...payloads] });
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
    // Every replica hears every notice, its own too: those are dropped before the parse.
    if (payload === undefined || payload.startsWith(this.ownPrefix)) return;
    let parsed: { k?: unknown; i?: unknown; f?: unknown; d?: unknown; m?: unknown };
    try {
      parsed = JSON.parse(payload) as typeof parsed;
    } catch {
      return;
    }
    if (typeof parsed.k !== "string" || !KINDS.has(parsed.k) || typeof parsed.i !== "string" || typeof parsed.f !== "string") return;
    if (parsed.f === this.replicaId) return;
    const from = parsed.f;
    if (Array.isArray(parsed.m)) {
      // Coalesced lease rows, in the order committed: each a change of its own (a row without an id is dropped; the receiver checks each row's shape).
      if (parsed.k !== "lease") return;
      for (const row of parsed.m as unknown[]) {
        const id = (row as { leaseId?: unknown } | null)?.leaseId;
        if (typeof id === "string") this.events.emit("change", { kind: "lease", id, from, data: row });
      }
      return;
    }
    this.events.emit("change", { kind: parsed.k as ChangeKind, id: parsed.i, from, ...(parsed.d === undefined ? {} : { data: parsed.d }) });
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
