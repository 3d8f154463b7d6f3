/** A video session as indexed: the agent that holds it and what it last reported. */
export interface VideoSessionRow {
  sessionId: string;
  agentId: string;
  serial: string;
  physicalId: string;
  requestedBy: string;
  createdAt: number;
  updatedAt: number;
  status: string;
  code: string;
  message: string;
  workerAvailable: boolean;
  recoveryState: string;
  manifestJson: string;
}

/** Filters of a listing; "" and undefined are no filter. */
export interface VideoSessionFilter {
  serial?: string;
  status?: string;
}

/** The video session index. Each method is one atomic write or read. */
export interface VideoSessionStore {
  get(sessionId: string): Promise<VideoSessionRow | undefined>;
  /**
   * Stores `merge(the stored row, or undefined)` as the session's row, read
   * and written atomically (no other write of the session in between, also
   * from another coordinator), and returns what was stored. `merge` is pure
   * and keeps `sessionId`; it may run more than once.
   */
  upsert(sessionId: string, merge: (existing: VideoSessionRow | undefined) => VideoSessionRow): Promise<VideoSessionRow>;
  countByStatus(): Promise<{ status: string; n: number }[]>;
  /**
   * Up to `limit` sessions matching the filter, newest first by
   * (created_at, session_id), strictly after the key `after` when given.
   * Ids compare bytewise in both dialects.
   */
  listAfter(filter: VideoSessionFilter, after: readonly [number, string] | undefined, limit: number): Promise<VideoSessionRow[]>;
}
