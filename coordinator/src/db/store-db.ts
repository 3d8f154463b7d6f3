import type Database from "better-sqlite3";
import pg from "pg";
import { CamelCasePlugin, Kysely, PostgresDialect, SqliteDialect, type Compilable, type CompiledQuery, type PostgresPool, type PostgresPoolClient, type SqliteDatabase } from "kysely";
import type { FarmDatabase } from "./database.js";
import type { StoreTables } from "./store-tables.js";

/** The query builder of the dialect-neutral stores: one statement text per call, compiled for the database's dialect. */
export type StoreDb = Kysely<StoreTables>;

const built = new WeakMap<FarmDatabase, StoreDb>();

/**
 * The database's Kysely instance, built once per opened database over its
 * own connection (the better-sqlite3 handle, or the pg pool): it opens
 * nothing and is never destroyed; `database.close()` ends what it uses.
 */
export function storeDbOf(database: FarmDatabase): StoreDb {
  let db = built.get(database);
  if (!db) {
    const dialect = database.dialect === "sqlite" ? new SqliteDialect({ database: preparedOnce(database.sqlite) }) : new PostgresDialect({ pool: numbersPool(database.pool) });
    db = new Kysely<StoreTables>({ dialect, plugins: [new CamelCasePlugin()] });
    built.set(database, db);
  }
  return db;
}

const MARK = "\u0000farm-param:";

/**
 * A statement built and compiled once, run with new values each time (the
 * activity log's insert, once per routed call). Kysely builds and compiles
 * a query on every call, most of a small statement's cost (store-ops
 * bench): here `build` is given a marker in place of each named value, and
 * each run binds the values where their markers were. Only for statements
 * whose values are passed through unchanged (no expression built from them).
 */
export function preparedStatement<P extends Record<string, unknown>, R>(db: StoreDb, names: readonly (keyof P & string)[], build: (params: P) => Compilable<R>): (params: P) => Promise<R[]> {
  // The markers stand in for values of any type: only the compiler sees them.
  const markers = Object.fromEntries(names.map((n) => [n, `${MARK}${n}`])) as unknown as P;
  const compiled = build(markers).compile();
  const slots = compiled.parameters.map((v) => typeof v === "string" && v.startsWith(MARK) ? v.slice(MARK.length) : undefined);
  const missing = names.filter((n) => !slots.includes(n));
  if (missing.length > 0) throw new Error(`prepared statement: ${missing.join(", ")} not bound as plain values in ${compiled.sql}`);
  return async (params) => {
    const parameters = slots.map((name, i) => name === undefined ? compiled.parameters[i] : params[name]);
    const query: CompiledQuery<R> = { ...compiled, parameters };
    return (await db.executeQuery(query)).rows;
  };
}

// Statements a store runs again and again (an activity entry per routed
// call) are compiled by SQLite once, as drizzle's prepared statements were:
// compiling is most of a small statement's cost (store-ops bench). The
// texts are the stores' own, few; a store building texts without bound
// (an IN list of any length) only empties the cache now and then.
const PREPARED_MAX = 256;

/** The better-sqlite3 handle as Kysely's driver uses it, keeping each statement it prepared; closing it is the database's business. */
function preparedOnce(sqlite: Database.Database): SqliteDatabase {
  const prepared = new Map<string, Database.Statement>();
  return {
    close: () => undefined,
    prepare(text: string) {
      let statement = prepared.get(text);
      if (!statement) {
        if (prepared.size >= PREPARED_MAX) prepared.clear();
        // Looked up on the handle at each miss, not bound once: tests watch what it prepares (db/testing/query-plans.ts).
        statement = sqlite.prepare(text);
        prepared.set(text, statement);
      }
      return statement;
    },
  };
}

// bigint (int8) columns hold epoch milliseconds and byte counts: read them
// as JS numbers (exact below 2^53), as SQLite and drizzle's `mode: "number"` do.
const INT8 = 20;
const types = {
  getTypeParser: ((oid: number, format?: "text" | "binary") => oid === INT8 ? Number : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

/** The pool as Kysely's driver uses it, with each query reading int8 as a number; ending it is the database's business. */
function numbersPool(pool: pg.Pool): PostgresPool {
  // One wrapper per pooled client: Kysely keeps its connection object per client it is given.
  const wrapped = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  return {
    async connect(): Promise<PostgresPoolClient> {
      const client = await pool.connect();
      let w = wrapped.get(client);
      if (!w) {
        w = {
          // Only the (text, values) form: the stores never stream with a cursor.
          query: ((text: unknown, values?: readonly unknown[]) => {
            if (typeof text !== "string") throw new Error("cursors are not used by farm's stores");
            return client.query({ text, values: values ? [...values] : [], types });
          }) as unknown as PostgresPoolClient["query"],
          release: (destroy?: boolean) => client.release(destroy),
        };
        wrapped.set(client, w);
      }
      return w;
    },
    end: async () => undefined,
  };
}
