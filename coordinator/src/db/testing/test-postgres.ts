import { randomBytes } from "node:crypto";
import pg from "pg";
import { inject } from "vitest";

declare module "vitest" {
  export interface ProvidedContext {
    /** The test run's PostgreSQL cluster (superuser URL), from test/support/pg-global-setup.ts. */
    pgUrl: string;
  }
}

/**
 * A new, empty database in the test run's PostgreSQL cluster (started by
 * test/support/pg-global-setup.ts): its URL, and a drop for afterEach.
 */
export async function createTestDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const admin = inject("pgUrl");
  const name = `farm_${randomBytes(6).toString("hex")}`;
  await adminQuery(admin, `CREATE DATABASE ${name}`);
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => adminQuery(admin, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}

async function adminQuery(url: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}
