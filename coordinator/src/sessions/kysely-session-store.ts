import type { JsonValue } from "@bufbuild/protobuf";
import { sql, type Selectable } from "kysely";
import type { DatabaseDialect } from "../db/database.js";
import { preparedStatement, type StoreDb } from "../db/store-db.js";
import type { StoreTables } from "../db/store-tables.js";
import type { SessionFilter, SessionRow, SessionState, SessionStore } from "./session-store.js";

type Stored = Selectable<StoreTables["sessions"]>;

/**
 * Sessions, one implementation for SQLite and PostgreSQL (the SQL is the
 * same on both). Three columns are stored differently, so they are written
 * in a form both take (JSON text, 1/0) and read back into one shape.
 */
export class KyselySessionStore implements SessionStore {
  /** A lease's running sessions: read at every lease end (its building was most of a release's cost on SQLite). */
  private readonly runningOf: (p: { leaseId: string }) => Promise<Stored[]>;

  constructor(
    private readonly db: StoreDb,
    private readonly dialect: DatabaseDialect,
  ) {
    this.runningOf = preparedStatement(
      db,
      ["leaseId"],
      (p: { leaseId: string }) => db.selectFrom("sessions").selectAll().where("status", "=", "running").where("leaseId", "=", p.leaseId).orderBy("createdAt", "asc").orderBy("sessionId", "asc"),
    );
  }

  async insert(row: SessionRow): Promise<void> {
    await this.db.insertInto("sessions").values(toStored(row)).execute();
  }

  async insertUnderLease(row: SessionRow): Promise<"stored" | "released" | "expired" | "unknown"> {
    const v = toStored(row);
    const values = sql.join([
      sql`${v.sessionId}`,
      sql`${v.name}`,
      sql`${v.physicalId}`,
      sql`${v.serial}`,
      sql`${v.agentId}`,
      sql`${v.leaseId}`,
      sql`${v.owner}`,
      sql`${v.status}`,
    ]);
    const insert = this.dialect === "postgres" ?
      // PostgreSQL: the lease row is updated (marked) in the same statement. A release committing at the
      // same moment holds or waits for that row's lock: if it ended the lease first, the UPDATE finds it
      // no longer active and nothing is stored; if this start locked it first, the release waits for
      // this commit and then sees the mark (a row it waited for is read as committed, where a subquery
      // on sessions would still read its older snapshot). Types are cast: INSERT … SELECT infers none.
      sql`WITH live AS (UPDATE leases SET has_sessions = true WHERE lease_id = ${v.leaseId} AND state = 'active' RETURNING lease_id)
          INSERT INTO sessions (${sql.raw(INSERT_COLUMNS)})
          SELECT ${values}, ${v.createdAt}::bigint, ${v.endedAt}::bigint, ${v.stepCount}::int, ${v.failedStepCount}::int, ${v.context}::jsonb,
                 ${v.ocr}::boolean, ${v.policyJson}, ${v.policySha256}, ${v.secretNames}::jsonb
          FROM live` :
      // SQLite: one writer, statements in turn; the release's own follow-up read (endForLease) comes after its commit.
      sql`INSERT INTO sessions (${sql.raw(INSERT_COLUMNS)})
          SELECT ${values}, ${v.createdAt}, ${v.endedAt}, ${v.stepCount}, ${v.failedStepCount}, ${v.context}, ${v.ocr}, ${v.policyJson}, ${v.policySha256}, ${v.secretNames}
          WHERE EXISTS (SELECT 1 FROM leases WHERE lease_id = ${v.leaseId} AND state = 'active')`;
    const done = await insert.execute(this.db);
    if (Number(done.numAffectedRows ?? 0) === 1) return "stored";
    const lease = await sql<{ state: string }>`SELECT state FROM leases WHERE lease_id = ${v.leaseId}`.execute(this.db);
    const state = lease.rows[0]?.state;
    return state === "released" || state === "expired" ? state : "unknown";
  }

  async get(sessionId: string): Promise<SessionRow | undefined> {
    const row = await this.db.selectFrom("sessions").selectAll().where("sessionId", "=", sessionId).limit(1).executeTakeFirst();
    return row && fromStored(row);
  }

  async end(sessionId: string, status: Exclude<SessionState, "running">, endedAt: number): Promise<SessionRow | undefined> {
    // The status check is in the UPDATE: of two replicas ending one session, one wins.
    const row = await this.db
      .updateTable("sessions")
      .set({ status, endedAt })
      .where("sessionId", "=", sessionId)
      .where("status", "=", "running")
      .returningAll()
      .executeTakeFirst();
    return row && fromStored(row);
  }

  async running(leaseId?: string): Promise<SessionRow[]> {
    if (leaseId !== undefined) return (await this.runningOf({ leaseId })).map(fromStored);
    const q = this.db.selectFrom("sessions").selectAll().where("status", "=", "running");
    return (await q.orderBy("createdAt", "asc").orderBy("sessionId", "asc").execute()).map(fromStored);
  }

  async listAfter(filter: SessionFilter, after: readonly [number, string] | undefined, limit: number): Promise<SessionRow[]> {
    let q = this.db.selectFrom("sessions").selectAll();
    if (filter.physicalId) q = q.where("physicalId", "=", filter.physicalId);
    if (filter.status) q = q.where("status", "=", filter.status);
    if (filter.owner) q = q.where("owner", "=", filter.owner);
    if (after) {
      const [at, id] = after;
      q = q.where((eb) => eb.or([eb("createdAt", "<", at), eb.and([eb("createdAt", "=", at), eb("sessionId", "<", id)])]));
    }
    return (await q.orderBy("createdAt", "desc").orderBy("sessionId", "desc").limit(limit).execute()).map(fromStored);
  }
}

const INSERT_COLUMNS = "session_id, name, physical_id, serial, agent_id, lease_id, owner, status, created_at, ended_at, step_count, failed_step_count, context, ocr, policy_json, policy_sha256, secret_names";

// JSON as text and a boolean as 1/0: SQLite stores them so, PostgreSQL's jsonb and boolean parse them.
function toStored(row: SessionRow): Stored {
  return { ...row, context: JSON.stringify(row.context), ocr: row.ocr ? 1 : 0, secretNames: JSON.stringify(row.secretNames) };
}

function fromStored(row: Stored): SessionRow {
  return {
    ...row,
    context: (typeof row.context === "string" ? JSON.parse(row.context) : row.context) as Record<string, JsonValue>,
    ocr: row.ocr === true || row.ocr === 1,
    secretNames: (typeof row.secretNames === "string" ? JSON.parse(row.secretNames) : row.secretNames) as string[],
  };
}
