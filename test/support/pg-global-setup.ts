import type { TestProject } from "vitest/node";
import { startPgCluster } from "./pg-cluster.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** The test run's PostgreSQL cluster (superuser URL); each test file makes its own databases in it. */
    pgUrl: string;
  }
}

// One private PostgreSQL cluster for the whole run, stopped and removed at its end.
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const cluster = await startPgCluster({ fast: true, maxConnections: 300 });
  project.provide("pgUrl", cluster.url);
  return () => cluster.stop();
}
