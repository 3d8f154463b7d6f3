/** One routed action as stored. */
export interface ActivityRow {
  /** Unique, and ascending in the order entries were written. */
  id: number;
  at: number;
  caller: string;
  leaseId: string;
  serial: string;
  physicalId: string;
  agentId: string;
  command: string;
  outcome: string;
  durationMs: number;
  requestId: string;
  detail: string;
}

export type ActivityEntry = Omit<ActivityRow, "id">;

export interface ActivityFilter {
  serial?: string;
  sinceMs?: number;
}

export interface OutcomeCount {
  command: string;
  outcome: string;
  n: number;
}

/** Where the activity log is kept. Each method is one atomic write or one read. */
export interface ActivityStore {
  /** Appends an entry; the row as stored, with its id. */
  insert(entry: ActivityEntry): Promise<ActivityRow>;
  /** One entry by its id (another replica's, re-read for watchers). */
  get(id: number): Promise<ActivityRow | undefined>;
  /** Entries per command and outcome, over the whole log. */
  countByOutcome(): Promise<OutcomeCount[]>;
  /** Up to `limit` entries newest first (by id), with an id below `beforeId` when given. */
  listBefore(filter: ActivityFilter, beforeId: number | undefined, limit: number): Promise<ActivityRow[]>;
}
