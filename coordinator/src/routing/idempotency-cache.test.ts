import { describe, expect, it } from "vitest";
import { refusalReport, toErrorReport } from "@farm/shared/errors";
import { IdempotencyCache } from "./idempotency-cache.js";

describe("IdempotencyCache", () => {
  it("answers a repeat with the first outcome, and refuses a different request under the same id before running it", async () => {
    const cache = new IdempotencyCache();
    let runs = 0;
    const call = async () => ++runs;
    expect(await cache.run("ci", "r-1", "shell:a:ls", call)).toBe(1);
    expect(await cache.run("ci", "r-1", "shell:a:ls", call)).toBe(1);
    const err = await cache.run("ci", "r-1", "shell:a:reboot", call).then(() => undefined, (e: unknown) => e);
    expect(runs).toBe(1);
    expect(toErrorReport(err)).toEqual(refusalReport("IDEMPOTENCY_CONFLICT", "request id r-1 was used for a different request", "target.request_id"));
  });
});
