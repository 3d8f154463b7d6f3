import { EventEmitter } from "node:events";

/** Changes only watchers care about: receivers re-read the row for their Watch streams, nothing else. */
export const WATCHED_KINDS = ["activity", "evidence", "video", "session", "step"] as const;
export type WatchedKind = (typeof WATCHED_KINDS)[number];

/** What a replica tells the others it changed in the shared database (they re-read it). */
export type ChangeKind = "agent" | "lease" | "queue" | "labels" | "token" | "summaryKey" | "cleanup" | WatchedKind;

/** Every kind, for receivers to drop what they do not know. */
export const CHANGE_KINDS: readonly ChangeKind[] = ["agent", "lease", "queue", "labels", "token", "summaryKey", "cleanup", ...WATCHED_KINDS];

/** One change as it travels: what, which one, from which replica. */
export interface Change {
  kind: ChangeKind;
  id: string;
  from: string;
  /** What changed, where the kind carries it (a lease: the row as committed); untrusted shape, checked by the receiver. */
  data?: unknown;
}

interface BusEvents {
  change: [change: Change];
  /** Changes may have been missed (the connection was lost): re-read everything. */
  resync: [];
}

/**
 * Change notices between replicas. Most notices carry only what changed (a
 * kind and an id): receivers re-read the row. A lease notice carries the
 * row as committed (no secret: a lease token is stored only as its hash),
 * so the others apply it without a read; so does a cleanup notice (a phone's
 * cleanup state, without its baseline). A replica never hears its own.
 */
export interface ChangeBus {
  readonly events: EventEmitter<BusEvents>;
  /** Tells the other replicas; call after the change is committed. */
  publish(kind: ChangeKind, id: string, data?: unknown): Promise<void>;
  close(): Promise<void>;
}

/** One coordinator (SQLite): nobody else to tell. */
export class LocalChangeBus implements ChangeBus {
  readonly events = new EventEmitter<BusEvents>();

  async publish(): Promise<void> {}

  async close(): Promise<void> {}
}
