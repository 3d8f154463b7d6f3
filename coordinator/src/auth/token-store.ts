import { createHash, randomBytes } from "node:crypto";
import { and, eq, gt, isNull, ne } from "drizzle-orm";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import type { CoordinatorDb } from "../db/open-database.js";
import { tokens } from "../db/schema.js";
import { readPage, type Page, type PageRequest } from "../paging.js";

export type TokenKind = "agent" | "user";

/** What a user token may do; each role includes the ones before it. */
export type Role = "viewer" | "operator" | "admin";
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
  tokenName: string;
  kind: TokenKind;
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
  constructor(private readonly db: CoordinatorDb) {}

  /** A new token; user tokens default to operator. */
  create(name: string, kind: TokenKind, role: Role | null = kind === "user" ? "operator" : null): { record: TokenRecord; secret: string } {
    if (!namePattern.test(name)) {
      throw invalidArgument("name", "token name must be 1-64 of A-Z a-z 0-9 . _ - and start with a letter or digit");
    }
    if (role !== null && kind !== "user") throw invalidArgument("role", "only user tokens have a role");
    if (role === null && kind === "user") throw invalidArgument("role", "a user token needs a role");
    const existing = this.db.select().from(tokens).where(eq(tokens.name, name)).get();
    if (existing) {
      throw farmError(Errors.ALREADY_EXISTS, `a token named "${name}" already exists`, "name");
    }
    const secret = `farm${kind === "agent" ? "a" : "u"}_${randomBytes(32).toString("base64url")}`;
    const record: TokenRecord = { name, kind, role, admin: role === "admin", agentId: null, createdAt: Date.now(), revokedAt: null };
    this.db.insert(tokens).values({ ...record, hash: hashToken(secret) }).run();
    return { record, secret };
  }

  /** Every token, by name: for the coordinator itself (the API reads pages). */
  list(): TokenRecord[] {
    return this.db
      .select()
      .from(tokens)
      .orderBy(tokens.name)
      .all()
      .map(toRecord);
  }

  /** One page, by name (the primary key). */
  listPage(page: PageRequest): Page<TokenRecord> {
    return readPage(page, { list: "tokens" }, ["string"] as const, (r: TokenRecord) => [r.name] as const, (after, limit) =>
      this.db
        .select()
        .from(tokens)
        .where(after ? gt(tokens.name, after[0]) : undefined)
        .orderBy(tokens.name)
        .limit(limit)
        .all()
        .map(toRecord),
    );
  }

  get(name: string): TokenRecord | undefined {
    const row = this.db.select().from(tokens).where(eq(tokens.name, name)).get();
    return row ? toRecord(row) : undefined;
  }

  revoke(name: string): TokenRecord {
    const row = this.db.select().from(tokens).where(eq(tokens.name, name)).get();
    if (!row) throw farmError(Errors.NOT_FOUND, `no token named "${name}"`, "name");
    if (row.revokedAt === null) {
      row.revokedAt = Date.now();
      this.db.update(tokens).set({ revokedAt: row.revokedAt }).where(eq(tokens.name, name)).run();
    }
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
  bindAgent(tokenName: string, agentId: string): void {
    this.db.transaction((tx) => {
      const row = tx.select().from(tokens).where(eq(tokens.name, tokenName)).get();
      if (!row || row.kind !== "agent") throw farmError(Errors.PERMISSION_DENIED, "only agent tokens attach agents");
      if (row.agentId !== null && row.agentId !== agentId) {
        throw farmError(Errors.AGENT_IDENTITY_MISMATCH, `agent token "${tokenName}" is bound to another agent; it can attach only as that agent`, "agent_id");
      }
      const other = tx
        .select({ name: tokens.name })
        .from(tokens)
        .where(and(eq(tokens.agentId, agentId), ne(tokens.name, tokenName), isNull(tokens.revokedAt)))
        .get();
      if (other) {
        throw farmError(Errors.AGENT_IDENTITY_MISMATCH, `agent ${agentId} is bound to another agent token; "${tokenName}" cannot attach as it`, "agent_id");
      }
      if (row.agentId === null) tx.update(tokens).set({ agentId }).where(eq(tokens.name, tokenName)).run();
    });
  }

  /** The token an agent id is bound to (live or not), for logs. */
  boundTo(agentId: string): string | undefined {
    return this.db.select({ name: tokens.name }).from(tokens).where(and(eq(tokens.agentId, agentId), isNull(tokens.revokedAt))).get()?.name;
  }

  /** The principal for a presented secret, or a reason it is refused. */
  authenticate(secret: string): Principal | "unknown" | "revoked" {
    const row = this.db.select().from(tokens).where(eq(tokens.hash, hashToken(secret))).get();
    if (!row) return "unknown";
    if (row.revokedAt !== null) return "revoked";
    const role = roleOf(row);
    return { tokenName: row.name, kind: row.kind, role, admin: role === "admin" };
  }

  count(): number {
    return this.db.select().from(tokens).all().length;
  }
}

/** A user token's role; rows written before roles existed read as the 0004 migration set them. */
function roleOf(row: typeof tokens.$inferSelect): Role | null {
  if (row.kind !== "user") return null;
  return row.role ?? (row.admin ? "admin" : "operator");
}

function toRecord(row: typeof tokens.$inferSelect): TokenRecord {
  const role = roleOf(row);
  return { name: row.name, kind: row.kind, role, admin: role === "admin", agentId: row.agentId, createdAt: row.createdAt, revokedAt: row.revokedAt };
}
