/** A dashboard sign-in as stored: the sha256 of its id (the cookie), never the id or the user's token. */
export interface WebSessionRow {
  idHash: string;
  tokenName: string;
  createdAt: number;
  expiresAt: number;
}

/** The caps a new sign-in is held to. */
export interface WebSessionLimits {
  /** Sessions that expired by now are deleted first. */
  now: number;
  /** Live sessions one token may have, counting the new one: its oldest beyond that are deleted. */
  perUser: number;
  /** Live sessions in all; at that many, the new one is refused. */
  total: number;
}

/** Where dashboard sign-ins are kept, shared by the farm's coordinators. Each method is one atomic write or one read. */
export interface WebSessionStore {
  /**
   * Deletes the expired sessions and the user's oldest beyond the cap, then
   * inserts `row` unless `limits.total` sessions are live; false when refused
   * (the deletions stand). One transaction.
   */
  add(row: WebSessionRow, limits: WebSessionLimits): Promise<boolean>;
  get(idHash: string): Promise<WebSessionRow | undefined>;
  delete(idHash: string): Promise<void>;
  /** Deletes every session of the token; returns how many there were. */
  deleteOf(tokenName: string): Promise<number>;
  /** Sessions of the token not expired at `now`. */
  countOf(tokenName: string, now: number): Promise<number>;
}
