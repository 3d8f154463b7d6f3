import { EventEmitter } from "node:events";
import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import type { Logger } from "@farm/shared/log";
import type { ReplicaRow, ReplicaStore } from "./replica-store.js";

/** How often a replica says it is alive, and after how long without that it is gone. */
export const REPLICA_HEARTBEAT_MS = 1_000;
export const REPLICA_STALE_MS = 5_000;

/** The bearer token prefix of a replica's credential: `farmr_<replica id>.<secret>`. */
const CREDENTIAL = /^farmr_([0-9a-f-]{36})\.([A-Za-z0-9_-]{43})$/;

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

interface MembershipEvents {
  /** A replica stopped or missed its heartbeats: what it held (agents, waiting calls) is held by nobody now. */
  gone: [replicaId: string];
  /** This replica was expired by another (it stalled) and registered again: the others dropped what it holds. */
  rejoined: [];
}

export interface MembershipOptions {
  /** Where other replicas reach this one (its own gRPC/Connect URL). */
  url: string;
  log: Logger;
  heartbeatMs?: number;
  staleMs?: number;
  now?: () => number;
}

/**
 * This replica's place among the coordinators sharing the database: its
 * row (id, URL, the hash of a secret made at start), a heartbeat, and the
 * live set, refreshed with each beat. Any replica expires one that stopped
 * beating, and every replica then hears that it is gone.
 */
export class Membership {
  readonly events = new EventEmitter<MembershipEvents>();
  readonly id = randomUUID();
  private readonly secret = randomBytes(32).toString("base64url");
  private members = new Map<string, ReplicaRow>();
  /**
   * Credentials already proven, with the stored hash they matched: every forwarded call presents one,
   * and a sha256 per call was a visible share of a forwarded call's cost. Valid only while that
   * replica's row still has that hash (it is gone, or registered again with a new secret, otherwise).
   */
  private readonly proven = new Map<string, { id: string; secretHash: string }>();
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> | undefined;

  private constructor(
    private readonly store: ReplicaStore,
    private readonly opts: MembershipOptions,
  ) {}

  static async join(store: ReplicaStore, opts: MembershipOptions): Promise<Membership> {
    const m = new Membership(store, opts);
    await m.register();
    await m.beat();
    m.timer = setInterval(() => {
      m.beating ??= m.beat().finally(() => (m.beating = undefined));
    }, opts.heartbeatMs ?? REPLICA_HEARTBEAT_MS);
    m.timer.unref();
    return m;
  }

  /** This replica's bearer credential for calls to the others. */
  credential(): string {
    return `farmr_${this.id}.${this.secret}`;
  }

  /** Live replicas, this one included. */
  live(): ReplicaRow[] {
    return [...this.members.values()];
  }

  isLive(replicaId: string): boolean {
    return this.members.has(replicaId);
  }

  urlOf(replicaId: string): string | undefined {
    return this.members.get(replicaId)?.url;
  }

  /**
   * The replica a bearer credential proves, or undefined. A replica this one
   * has not seen yet (it just started) is looked up in the database once.
   */
  async verify(bearer: string): Promise<string | undefined> {
    const known = this.proven.get(bearer);
    if (known && this.members.get(known.id)?.secretHash === known.secretHash) return known.id;
    const m = CREDENTIAL.exec(bearer);
    if (!m) return undefined;
    const [, id, secret] = m as unknown as [string, string, string];
    let row = this.members.get(id);
    if (!row) {
      await this.refresh();
      row = this.members.get(id);
    }
    if (!row) return undefined;
    const want = Buffer.from(row.secretHash, "hex");
    const got = Buffer.from(sha256(secret), "hex");
    if (!(want.length === got.length && timingSafeEqual(want, got))) return undefined;
    // One live credential per replica: a handful of entries, dropped wholesale if ever many.
    if (this.proven.size >= 64) this.proven.clear();
    this.proven.set(bearer, { id, secretHash: row.secretHash });
    return id;
  }

  /** Leaves: the row goes, and with it the claim on this replica's agents. */
  async leave(): Promise<void> {
    clearInterval(this.timer);
    await this.beating;
    await this.store.remove(this.id);
  }

  private now(): number {
    return this.opts.now?.() ?? Date.now();
  }

  private async register(): Promise<void> {
    const now = this.now();
    await this.store.upsert({ id: this.id, url: this.opts.url, secretHash: sha256(this.secret), startedAt: now, heartbeatAt: now });
  }

  private async beat(): Promise<void> {
    try {
      const now = this.now();
      if (!(await this.store.heartbeat(this.id, now))) {
        // Expired by another replica (this process stalled): come back as the same member.
        this.opts.log.warn("this replica was expired by another (missed heartbeats); registering again", { replicaId: this.id });
        await this.register();
        this.events.emit("rejoined");
      }
      for (const id of await this.store.expire(now - (this.opts.staleMs ?? REPLICA_STALE_MS))) {
        this.opts.log.warn("replica gone: missed its heartbeats", { replicaId: id });
      }
      await this.refresh();
    } catch (err) {
      this.opts.log.error("replica heartbeat failed", { error: (err as Error).message });
    }
  }

  private async refresh(): Promise<void> {
    const rows = await this.store.list();
    const next = new Map(rows.map((r) => [r.id, r]));
    const before = this.members;
    this.members = next;
    for (const id of before.keys()) if (!next.has(id)) this.events.emit("gone", id);
  }
}
