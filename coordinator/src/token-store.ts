import { createHash, randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import { Code } from "@connectrpc/connect";
import { ErrorCodes, farmError, invalidArgument } from "@farm/shared/errors";
import type { CoordinatorDb } from "./db/open-database.js";
import { tokens } from "./db/schema.js";

export type TokenKind = "agent" | "user";

export interface TokenRecord {
  name: string;
  kind: TokenKind;
  admin: boolean;
  createdAt: number;
  revokedAt: number | null;
}

/** Who is calling, once a bearer token has been checked. */
export interface Principal {
  tokenName: string;
  kind: TokenKind;
  admin: boolean;
}

const namePattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export function hashToken(secret: string): string {
  return createHash("sha256").update(secret).digest("hex");
}

/**
 * Bearer tokens, stored as sha256 hashes. Secrets are 256 random bits, so a
 * plain hash (no salt, no KDF) is enough: there is nothing to brute-force.
 */
export class TokenStore {
  constructor(private readonly db: CoordinatorDb) {}

  create(name: string, kind: TokenKind, admin: boolean): { record: TokenRecord; secret: string } {
    if (!namePattern.test(name)) {
      throw invalidArgument("name", "token name must be 1-64 of A-Z a-z 0-9 . _ - and start with a letter or digit");
    }
    if (admin && kind !== "user") throw invalidArgument("admin", "only user tokens can be admin tokens");
    const existing = this.db.select().from(tokens).where(eq(tokens.name, name)).get();
    if (existing) {
      throw farmError(Code.AlreadyExists, ErrorCodes.alreadyExists, `a token named "${name}" already exists`, "name");
    }
    const secret = `farm${kind === "agent" ? "a" : "u"}_${randomBytes(32).toString("base64url")}`;
    const record: TokenRecord = { name, kind, admin, createdAt: Date.now(), revokedAt: null };
    this.db.insert(tokens).values({ ...record, hash: hashToken(secret) }).run();
    return { record, secret };
  }

  list(): TokenRecord[] {
    return this.db
      .select()
      .from(tokens)
      .orderBy(tokens.name)
      .all()
      .map(toRecord);
  }

  revoke(name: string): TokenRecord {
    const row = this.db.select().from(tokens).where(eq(tokens.name, name)).get();
    if (!row) throw farmError(Code.NotFound, ErrorCodes.notFound, `no token named "${name}"`, "name");
    if (row.revokedAt === null) {
      row.revokedAt = Date.now();
      this.db.update(tokens).set({ revokedAt: row.revokedAt }).where(eq(tokens.name, name)).run();
    }
    return toRecord(row);
  }

  /** The principal for a presented secret, or a reason it is refused. */
  authenticate(secret: string): Principal | "unknown" | "revoked" {
    const row = this.db.select().from(tokens).where(eq(tokens.hash, hashToken(secret))).get();
    if (!row) return "unknown";
    if (row.revokedAt !== null) return "revoked";
    return { tokenName: row.name, kind: row.kind, admin: row.admin };
  }

  count(): number {
    return this.db.select().from(tokens).all().length;
  }
}

function toRecord(row: typeof tokens.$inferSelect): TokenRecord {
  return { name: row.name, kind: row.kind, admin: row.admin, createdAt: row.createdAt, revokedAt: row.revokedAt };
}
