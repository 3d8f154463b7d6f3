import type pg from "pg";
import type { FarmDatabase } from "../database.js";

/**
 * The plans of the SELECTs a store issues while `run` runs, as each dialect
 * explains them. PostgreSQL is asked with sequential scans switched off:
 * a test's tables are small enough to be read whole whatever their indexes,
 * and the question is which index it would use on a large one.
 */
export async function selectPlans(database: FarmDatabase, run: () => Promise<unknown>): Promise<string[]> {
  const seen: { sql: string; params: unknown[] }[] = [];
  if (database.dialect === "sqlite") {
    const sqlite = database.sqlite;
    const prepare = sqlite.prepare.bind(sqlite);
    sqlite.prepare = ((source: string) => {
      const statement = prepare(source);
      if (!/^\s*select/i.test(source)) return statement;
      for (const method of ["all", "get", "iterate", "raw"] as const) {
        const original = (statement[method] as (...a: unknown[]) => unknown).bind(statement);
        (statement as unknown as Record<string, unknown>)[method] = (...params: unknown[]) => {
          if (method !== "raw") seen.push({ sql: source, params });
          return original(...params);
        };
      }
      return statement;
    }) as typeof sqlite.prepare;
    try {
      await run();
    } finally {
      sqlite.prepare = prepare;
    }
    return seen.map(({ sql, params }) => (sqlite.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[]).map((r) => r.detail).join("; "));
  }
  const pool = database.pool;
  const watch = (query: (...a: unknown[]) => unknown) => (config: unknown, values?: unknown) => {
    const text = typeof config === "string" ? config : (config as { text: string }).text;
    const params = values ?? (typeof config === "string" ? undefined : (config as { values?: unknown[] }).values) ?? [];
    if (/^\s*select/i.test(text)) seen.push({ sql: text, params: params as unknown[] });
    return query(config, values);
  };
  type Queries = { query: unknown };
  const query = pool.query.bind(pool) as (...a: unknown[]) => unknown;
  (pool as unknown as Queries).query = watch(query);
  // Kysely's stores (db/store-db.ts) run on a client checked out of the pool: watch those too, until the run ends.
  // (pool.query itself checks out with a callback: that form is passed through, its queries already watched above.)
  const connect = pool.connect.bind(pool) as (...a: unknown[]) => Promise<pg.PoolClient>;
  const watched = new Map<Queries, unknown>();
  (pool as unknown as { connect: unknown }).connect = async (...a: unknown[]) => {
    if (a.length > 0) return connect(...a);
    const client = await connect();
    const c = client as unknown as Queries;
    if (!watched.has(c)) {
      watched.set(c, c.query);
      c.query = watch(client.query.bind(client) as (...a: unknown[]) => unknown);
    }
    return client;
  };
  try {
    await run();
  } finally {
    (pool as unknown as Queries).query = query;
    (pool as unknown as { connect: unknown }).connect = connect;
    for (const [c, original] of watched) c.query = original;
  }
  const client = await pool.connect();
  try {
    await client.query("SET enable_seqscan = off");
    const plans: string[] = [];
    for (const { sql, params } of seen) plans.push((await client.query<{ "QUERY PLAN": string }>(`EXPLAIN ${sql}`, params)).rows.map((r) => r["QUERY PLAN"]).join("; "));
    await client.query("RESET enable_seqscan");
    return plans;
  } finally {
    client.release();
  }
}
