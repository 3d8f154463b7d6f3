/**
 * With FARM_TEST_CPU_LOG=FILE (vitest.config.ts adds this setup file then),
 * each test file appends one JSON line to FILE when it ends: the CPU its
 * vitest fork used since it started (vitest's start-up and imports included)
 * and the CPU of the processes it started and reaped (coordinators, agents,
 * adb servers, devsim, Chromium, npm: Linux's cutime + cstime), in ms. Not
 * counted: what runs outside the fork's process tree (the run's PostgreSQL
 * cluster, whose backends serve every file; a daemon that re-parented itself).
 * `node scripts/test-cpu.mjs FILE` prints the table (docs/testing.md).
 */
import { appendFileSync, readFileSync } from "node:fs";
import { relative } from "node:path";
import { afterAll } from "vitest";

/** Linux reports cutime/cstime in USER_HZ ticks, which is 100 on every architecture Node supports. */
const TICK_MS = 10;

/** CPU (ms) of the reaped children of this process, from /proc/self/stat (fields 16 and 17). */
function childrenCpuMs(): number {
  const stat = readFileSync("/proc/self/stat", "utf8");
  // The command name (field 2) may hold spaces and parentheses: count fields after its closing one.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[13]) + Number(fields[14])) * TICK_MS;
}

const log = process.env["FARM_TEST_CPU_LOG"];
if (log) {
  afterAll(({}, suite) => {
    const own = process.cpuUsage();
    const line = {
      file: relative(process.cwd(), suite.file.filepath),
      pid: process.pid,
      ownMs: Math.round((own.user + own.system) / 1000),
      childrenMs: childrenCpuMs(),
      wallMs: Math.round(process.uptime() * 1000),
    };
    // One short line per append (O_APPEND): files ending at once in other forks do not interleave.
    appendFileSync(log, JSON.stringify(line) + "\n");
  });
}
