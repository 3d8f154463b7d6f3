import type { JsonValue } from "@bufbuild/protobuf";

export type SessionState = "running" | "passed" | "failed" | "lease_ended";

/** A recorded session as stored. */
export interface SessionRow {
  sessionId: string;
  name: string;
  physicalId: string;
  serial: string;
  agentId: string;
  leaseId: string;
  /** The token name that started it. */
  owner: string;
  status: SessionState;
  createdAt: number;
  endedAt: number | null;
  stepCount: number;
  /** Steps whose action failed. */
  failedStepCount: number;
  context: Record<string, JsonValue>;
  ocr: boolean;
  /** The validated capture policy as JSON, "" without one, and its sha256. */
  policyJson: string;
  policySha256: string;
  /** Names of the session's secrets (their values live only in memory). */
  secretNames: string[];
}

/** What a listing may be narrowed to; undefined means any. */
export interface SessionFilter {
  physicalId?: string | undefined;
  status?: SessionState | undefined;
  owner?: string | undefined;
}

/** Where sessions are kept. Each method is one atomic write or read. */
export interface SessionStore {
  insert(row: SessionRow): Promise<void>;
  /**
   * Stores a session only while its lease (`row.leaseId`) is active, in one
   * statement: a session is never stored under a lease already ended, and
   * on PostgreSQL the lease row is marked in that statement, so a release
   * running at the same moment either refuses this start or sees it
   * (pg-lease-store.ts's release). Returns "stored", or the lease's state
   * when nothing was stored ("released", "expired"; "unknown": no such lease).
   */
  insertUnderLease(row: SessionRow): Promise<"stored" | "released" | "expired" | "unknown">;
  get(sessionId: string): Promise<SessionRow | undefined>;
  /**
   * Ends a session that is still running. Returns the ended row, or
   * undefined when it was not running (nothing is written): the check and
   * the write are one statement, so a session ends exactly once.
   */
  end(sessionId: string, status: Exclude<SessionState, "running">, endedAt: number): Promise<SessionRow | undefined>;
  /** Running sessions, oldest first (all of them, or those under one lease). */
  running(leaseId?: string): Promise<SessionRow[]>;
  /** Up to `limit` rows newest first by (createdAt, sessionId), strictly after `after` in that order. */
  listAfter(filter: SessionFilter, after: readonly [number, string] | undefined, limit: number): Promise<SessionRow[]>;
}
