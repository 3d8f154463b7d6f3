import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, it } from "vitest";

// The built module, in a process of its own: the trace is decided once, from that process's environment.
const built = pathToFileURL(join(import.meta.dirname, "..", "dist", "stage-trace.js")).href;
const dir = mkdtempSync(join(tmpdir(), "stage-trace-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(env: Record<string, string>): string {
  const script = `import { stageTrace } from ${JSON.stringify(built)};
    console.log(stageTrace === undefined ? "off" : "on");
    stageTrace?.mark("call-1", "a"); stageTrace?.link("cmd-1", "call-1"); stageTrace?.mark("cmd-1", "b");`;
  const { FARM_STAGE_TRACE: _, ...rest } = process.env;
  return execFileSync(process.execPath, ["--input-type=module", "-e", script], { env: { ...rest, ...env }, encoding: "utf8" }).trim();
}

describe("stage trace", () => {
  it("is off (undefined, nothing written) unless FARM_STAGE_TRACE names a directory", () => {
    expect(run({})).toBe("off");
  });

  it("writes each mark and link on the monotonic clock, with the process's CPU so far, when the process exits, privately", () => {
    const out = join(dir, "trace");
    expect(run({ FARM_STAGE_TRACE: out })).toBe("on");
    const files = readdirSync(out);
    expect(files).toHaveLength(1);
    const file = join(out, files[0] as string);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const lines = readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l) as { id: string; stage: string; t?: number; cpu?: number; to?: string });
    expect(lines.map((l) => [l.id, l.stage, l.to])).toEqual([["call-1", "a", undefined], ["cmd-1", "link", "call-1"], ["cmd-1", "b", undefined]]);
    const [a, , b] = lines;
    expect(typeof a?.t).toBe("number");
    expect((b?.t as number) >= (a?.t as number)).toBe(true);
    // CPU so far: a started Node process has used some, and it never goes back.
    expect(a?.cpu).toBeGreaterThan(0);
    expect((b?.cpu as number) >= (a?.cpu as number)).toBe(true);
    expect(lines[1]?.cpu).toBeUndefined();
  });
});
