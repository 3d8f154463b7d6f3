import { createHash, randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import { decodePageToken, pageSizeOf, readPage, type Page, type PageRequest } from "../paging.js";
import type { Role, TokenKind, TokenRecordStore, TokenRow } from "./token-record-store.js";

// Declared with the stored row (token-record-store.ts), so that file imports nothing back from here.
export type { Role, TokenKind } from "./token-record-store.js";
export const ROLES: readonly Role[] = ["viewer", "operator", "admin"];

export interface TokenRecord {
  name: string;
  kind: TokenKind;
  /** User tokens only; null for agent tokens. */
  role: Role | null;
  /** role === "admin", for older clients. */
  admin: boolean;
  /** Agent tokens only: the agent id bound at first attach. */
  agentId: string | null;
  createdAt: number;
  revokedAt: number | null;
}

/** Who is calling, once a bearer token has been checked. */
export interface Principal {
  /** The token's name; for another replica of this coordinator, `replica:<id>`. */
  tokenName: string;
  kind: TokenKind | "replica";
  /** User tokens only. */
  role: Role | null;
  /** role === "admin"; travels to agents as requestedByAdmin. */
  admin: boolean;
}

const namePattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export function hashToken(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}

/** Whether `role` grants at least `needed`. */
export function roleAtLeast(role: Role | null, needed: Role): boolean {
  return role !== null && ROLES.indexOf(role) >= ROLES.indexOf(needed);
}

export function parseRole(text: string, field = "role"): Role {
  if ((ROLES as readonly string[]).includes(text)) return text as Role;
  throw invalidArgument(field, `role must be one of ${ROLES.join(", ")}, got "${text}"`);
}

/**
 * Bearer tokens, stored as sha256 hashes. Secrets are 256 random bits, so a
 * plain hash (no salt, no KDF) is enough: there is nothing to brute-force.
 */
export class TokenStore {
  /**
   * Principals of tokens seen in the last AUTH_CACHE_MS, by hash: every call
   * authenticates (twice: request gate, then interceptor), and on PostgreSQL
   * each lookup is a round trip. Only live tokens are kept; a revocation here
   * drops its entries at once, one on another replica as soon as its notice
   * arrives (`forget`), and at worst when the entry ages out.
   */
  private readonly recent = new Map<string, { principal: Principal; at: number }>();
  /** Replicas: when the last revocation here is past every replica's cache (see `revokedEverywhere`). */
  private fencedUntil = 0;

  /**
   * `shared`: other replicas keep caches like this one on the same
   * database; a revocation here is then answered only once their entries
   * for the token can no longer be used (`revokedEverywhere`).
   */
  constructor(
    private readonly store: TokenRecordStore,
    // Monotonic: a cache entry's age must not grow or shrink with a step of the wall clock.
    private readonly now: () => number = () => performance.now(),
    private readonly shared = false,
  ) {}

  /** Drops what is remembered of a token (revoked, perhaps through another replica). */
  forget(name: string): void {
    for (const [h, e] of this.recent) if (e.principal.tokenName === name) this.recent.delete(h);
  }

  /** Drops everything remembered (change notices were missed: a revocation may be among them). */
  forgetAll(): void {
    this.recent.clear();
  }

  /**
   * Resolves once no replica can still take a token revoked here as live.
   * Another replica's entry was read before the revocation committed, so it
   * was made (its `at`, taken before its read) before this replica saw the
   * revocation stored, and it ages out AUTH_CACHE_MS later: waiting that long
   * after the commit is exact whether or not its notice arrived (lost, late,
   * or the replica's listening connection down), and needs no answer from
   * the others. The revocation notice usually makes them forget at once;
   * this bounds it. One coordinator (not shared): at once.
   */
  async revokedEverywhere(): Promise<void> {
    const wait = this.fencedUntil - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, Math.ceil(wait)));
  }

  /** A new token; user tokens default to operator. */
  async create(name: string, kind: TokenKind, role: Role | null = kind === "user" ? "operator" : null): Promise<{ record: TokenRecord; secret: string }> {
    if (!namePattern.test(name)) {
      throw invalidArgument("name", "token name must be 1-64 of A-Z a-z 0-9 . _ - and start with a letter or digit");
    }
    if (role !== null && kind !== "user") throw invalidArgument("role", "only user tokens have a role");
    if (role === null && kind === "user") throw invalidArgument("role", "a user token needs a role");
    const secret = `farm${kind === "agent" ? "a" : "u"}_${randomBytes(32).toString("base64url")}`;
    const record: TokenRecord = { name, kind, role, admin: role === "admin", agentId: null, createdAt: Date.now(), revokedAt: null };
    if (!(await this.store.insert({ ...record, hash: hashToken(secret) }))) {
      throw farmError(Errors.ALREADY_EXISTS, `a token named "${name}" already exists`, "name");
    }
    return { record, secret };
  }

  /** Every token, by name: for the coordinator itself (the API reads pages). */
  async list(): Promise<TokenRecord[]> {
    return (await this.store.all()).map(toRecord);
  }

  /** One page, by name (the primary key). */
  async listPage(page: PageRequest): Promise<Page<TokenRecord>> {
    const scope = { list: "tokens" };
    const shape = ["string"] as const;
    // A bad token or size is refused before the store is read; readPage then cuts the page from the rows read.
    const size = pageSizeOf(page.pageSize);
    const after = decodePageToken(page.pageToken, scope, shape);
    const rows = (await this.store.listAfter(after?.[0], size + 1)).map(toRecord);
    return readPage(page, scope, shape, (r: TokenRecord) => [r.name] as const, () => rows);
  }

  async get(name: string): Promise<TokenRecord | undefined> {
    const row = await this.store.byName(name);
    return row ? toRecord(row) : undefined;
  }

  async revoke(name: string): Promise<TokenRecord> {
    this.forget(name);
    const row = await this.store.revoke(name, Date.now());
    // Committed by now: entries elsewhere were made before this instant (monotonic clock: the wall clock may step).
    if (this.shared) this.fencedUntil = Math.max(this.fencedUntil, performance.now() + AUTH_CACHE_MS);
    this.forget(name);
    if (!row) throw farmError(Errors.NOT_FOUND, `no token named "${name}"`, "name");
    return toRecord(row);
  }

  /**
   * An agent token is one agent: its first attach binds the agent id to it,
   * and from then on it attaches only as that agent. An agent id bound to
   * another live token cannot be taken by this one either (a revoked token's
   * binding does not count, so a replaced token can take over its agent).
   * The refusal names neither the bound id nor the other token: the caller
   * may be a thief; the coordinator's log has the details.
   */
  async bindAgent(tokenName: string, agentId: string): Promise<void> {
    const outcome = await this.store.bindAgent(tokenName, agentId);
    if (outcome === "not-agent") throw farmError(Errors.PERMISSION_DENIED, "only agent tokens attach agents");
    if (outcome === "token-bound-elsewhere") {
      throw farmError(Errors.AGENT_IDENTITY_MISMATCH, `agent token "${tokenName}" is bound to another agent; it can attach only as that agent`, "agent_id");
    }
    if (outcome === "agent-taken") {
      throw farmError(Errors.AGENT_IDENTITY_MISMATCH, `agent ${agentId} is bound to another agent token; "${tokenName}" cannot attach as it`, "agent_id");
    }
  }

  /** The live token an agent id is bound to, for logs. */
  boundTo(agentId: string): Promise<string | undefined> {
    return this.store.liveTokenOf(agentId);
  }

  /** The principal for a presented secret, or a reason it is refused. */
  async authenticate(secret: string): Promise<Principal | "unknown" | "revoked"> {
    const h = hashToken(secret);
    const now = this.now();
    const hit = this.recent.get(h);
    if (hit && now - hit.at < AUTH_CACHE_MS) return hit.principal;
    const row = await this.store.byHash(h);
    if (!row) return "unknown";
    const principal = principalOf(row);
    if (principal !== "revoked") {
      if (this.recent.size >= AUTH_CACHE_MAX) this.recent.clear();
      this.recent.set(h, { principal, at: now });
    } else {
      this.recent.delete(h);
    }
    return principal;
  }

  /** The principal of a token by name (a dashboard session re-checks its token this way), or why it is refused. */
  async principalByName(name: string): Promise<Principal | "unknown" | "revoked"> {
    const row = await this.store.byName(name);
    if (!row) return "unknown";
    return principalOf(row);
  }

  count(): Promise<number> {
    return this.store.count();
  }
}

/** How long an authenticated token is taken as live without asking the database again. */
export const AUTH_CACHE_MS = 2_000;
const AUTH_CACHE_MAX = 10_000;

function principalOf(row: TokenRow): Principal | "revoked" {
  if (row.revokedAt !== null) return "revoked";
  const role = roleOf(row);
  return { tokenName: row.name, kind: row.kind, role, admin: role === "admin" };
}

/** A user token's role; rows written before roles existed read as the 0004 migration set them. */
function roleOf(row: TokenRow): Role | null {
  if (row.kind !== "user") return null;
  return row.role ?? (row.admin ? "admin" : "operator");
}

function toRecord(row: TokenRow): TokenRecord {
  const role = roleOf(row);
  return { name: row.name, kind: row.kind, role, admin: role === "admin", agentId: row.agentId, createdAt: row.createdAt, revokedAt: row.revokedAt };
}
