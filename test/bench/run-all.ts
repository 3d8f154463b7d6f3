/**
 * `make bench`: runs every benchmark in turn (each prints its own lines),
 * then one table of all their rows and one JSON line with every report.
 *
 *   node test/dist/bench/run-all.js [--only routing-overhead,evidence-capture]
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type { BenchReport, BenchRow } from "./bench-report.js";

/**
 * In the order they run: first issue 38's (the floors, routing, the CLI,
 * remote adb, the coordinator under load), then the figures that must not
 * get slower (issue 23's capture, ownership and blob rows, lease cycles,
 * video, dashboard, live screen), then the rest.
 */
const BENCHES = [
  "rpc-floor",
  "coordinator-unary",
  "handler-context",
  "routing-overhead",
  "cli-cold-start",
  "client-library",
  "adb-tunnel",
  "coordinator-load",
  "evidence-capture",
  "ownership-cost",
  "blob-transfer",
  "lease-cycles",
  "video-verify",
  "dashboard-devices",
  "live-screen",
  "live-logcat",
  "devsim-pull",
  "app-endpoint",
  "ocr-frame",
  "policy-explain",
  "redaction",
  "session-steps",
  "capture-cost",
  "replicas",
  "byte-store",
  "store-ops",
  "pg-statement-cost",
  "adb-stalled-streams",
  "webdriver",
  "webdriver-locators",
] as const;

const { values } = parseArgs({ options: { only: { type: "string" } } });
const only = values.only ? new Set(values.only.split(",")) : undefined;

type Outcome = (BenchReport | { bench: string; error: string; rows?: undefined }) & { seconds?: number };

function run(bench: string): Promise<Outcome> {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, [fileURLToPath(new URL(`./${bench}.js`, import.meta.url))], { stdio: ["ignore", "pipe", "inherit"] });
    let last: BenchReport | undefined;
    let buffer = "";
    proc.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      process.stdout.write(chunk);
      buffer += chunk;
      const lines = buffer.split("\n");
      buffer = lines.pop() ?? "";
      for (const line of lines) {
        if (!line.startsWith("{\"bench\":")) continue;
        try {
          last = JSON.parse(line) as BenchReport;
        } catch {
          /* a line that only looked like a report */
        }
      }
    });
    proc.once("exit", (code) => resolve(last ?? { bench, error: `exited with ${code} before printing its report` }));
  });
}

function table(reports: Outcome[]): string {
  const header = ["bench", "measure", "instant (farm's own)", "floor / baseline (same run)", "realistic ratio", "target", "result"];
  const rows: string[][] = [];
  for (const r of reports) {
    if (!Array.isArray(r.rows)) {
      rows.push([r.bench, "(failed)", String((r as { error: string }).error), "", "", "", "FAIL"]);
      continue;
    }
    for (const row of r.rows as BenchRow[]) {
      rows.push([
        r.bench,
        row.measure,
        row.instant,
        row.baseline ?? "",
        row.realistic === null ? "—" : `${row.realistic.toFixed(2)}x ${row.profile ?? ""}`.trim(),
        row.target,
        row.pass === null ? "info" : row.pass ? "met" : "MISSED",
      ]);
    }
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(" | ")} |`;
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

const reports: Outcome[] = [];
const start = performance.now();
for (const bench of BENCHES) {
  if (only && !only.has(bench)) continue;
  console.log(`\n== ${bench}`);
  const t0 = performance.now();
  const outcome = await run(bench);
  outcome.seconds = Math.round((performance.now() - t0) / 1000);
  reports.push(outcome);
}
console.log(`\n${table(reports)}`);
const rows = reports.flatMap((r) => r.rows ?? []);
const failed = reports.filter((r) => !Array.isArray(r.rows)).map((r) => r.bench);
console.log(
  `\n${rows.filter((r) => r.pass === true).length} met, ${rows.filter((r) => r.pass === false).length} missed, ${rows.filter((r) => r.pass === null).length} for information; ${
    failed.length === 0 ? "every benchmark reported" : `no report from ${failed.join(", ")}`
  }; ${Math.round((performance.now() - start) / 1000)} s in all (${reports.map((r) => `${r.bench} ${r.seconds ?? "?"} s`).join(", ")})`,
);
console.log(JSON.stringify({ benches: reports }));
