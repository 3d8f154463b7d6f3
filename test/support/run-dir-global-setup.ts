import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    /** A directory for the test run's shared artifacts (the CLI packed once: packed-cli.ts); removed at the run's end. */
    runDir: string;
  }
}

// One directory per run and tier: what test files build once and share (never a lab: labs stay per file).
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = await mkdtemp(join(tmpdir(), "farm-run-"));
  project.provide("runDir", dir);
  return () => rm(dir, { recursive: true, force: true });
}
