import { readFileSync } from "node:fs";
import { relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * The order test files start in. Workers take files from one queue (both
 * tiers' files when one run has both projects), so a long file started last
 * is the run's tail: longest first. Vitest knows
 * the durations only from earlier runs on the same checkout (its cache in
 * node_modules/.vite), which a clean clone (CI) has not got: it then starts
 * the largest files first, and size says little (install-cli is short and
 * takes two minutes). So the durations of a recorded run, checked in
 * (test/support/test-durations.json, scripts/test-durations.mjs writes it),
 * stand in for the cache's. A file in neither is new: it starts first, as
 * vitest starts unknown files.
 */
export class DurationSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const recorded = recordedDurations();
    const root = this.ctx.config.root;
    const duration = (spec: TestSpecification): number => {
      const path = relative(root, spec.moduleId);
      const cached = this.ctx.cache.getFileTestResults(`${spec.project.name}:${path}`);
      return cached?.duration ?? recorded[path] ?? Number.POSITIVE_INFINITY;
    };
    // From vitest's own order (without durations, the largest files first), a stable sort over both
    // tiers at once: files with a duration longest first, unknown ones first and in vitest's order.
    // One run of both projects (`make test-all`) shares one queue of workers, so a long e2e file must
    // not wait behind the unit tier's short ones.
    return (await super.sort(files)).sort((a, b) => {
      const [da, db] = [duration(a), duration(b)];
      return da === db ? 0 : da > db ? -1 : 1;
    });
  }
}

/** File (relative to the root) -> milliseconds; an unreadable file is no durations, not a failed run. */
function recordedDurations(): Record<string, number> {
  try {
    return JSON.parse(readFileSync(new URL("./test-durations.json", import.meta.url), "utf8")) as Record<string, number>;
  } catch {
    return {};
  }
}
