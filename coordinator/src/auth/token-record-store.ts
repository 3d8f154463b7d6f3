export type TokenKind = "agent" | "user";

/** What a user token may do; each role includes the ones before it. */
export type Role = "viewer" | "operator" | "admin";

/** A token as stored: the sha256 of its secret, never the secret. */
export interface TokenRow {
  name: string;
  kind: TokenKind;
  /** NULL on rows written before roles existed (see TokenStore's roleOf) and on agent tokens. */
  role: Role | null;
  admin: boolean;
  hash: string;
  agentId: string | null;
  createdAt: number;
  revokedAt: number | null;
}

/**
 * What binding an agent id to an agent token found: bound (or already
 * bound to that id), not an agent token (or no such token), the token bound
 * to another id, or the id bound to another live token.
 */
export type BindOutcome = "bound" | "not-agent" | "token-bound-elsewhere" | "agent-taken";

/** Where bearer tokens are kept. Each method is one atomic write or one read. */
export interface TokenRecordStore {
  /** Inserts a new token; false (nothing written) when the name is taken. */
  insert(row: TokenRow): Promise<boolean>;
  /** Every token, by name. */
  all(): Promise<TokenRow[]>;
  /** Up to `limit` tokens by name, strictly after `after`. */
  listAfter(after: string | undefined, limit: number): Promise<TokenRow[]>;
  byName(name: string): Promise<TokenRow | undefined>;
  byHash(hash: string): Promise<TokenRow | undefined>;
  /** Marks the token revoked at `at` unless it already is; the row as stored after, or undefined when there is none. */
  revoke(name: string, at: number): Promise<TokenRow | undefined>;
  /**
   * Binds an unbound agent token to `agentId`, unless another live token is
   * bound to it: the checks and the write are one transaction, so two
   * attaches racing (on any replica) cannot both win.
   */
  bindAgent(tokenName: string, agentId: string): Promise<BindOutcome>;
  /** The live (unrevoked) token bound to an agent id. */
  liveTokenOf(agentId: string): Promise<string | undefined>;
  count(): Promise<number>;
}
