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

/** In the order they run; the first four carry issue 23's targets. */
const BENCHES = [
  "routing-overhead",
  "evidence-capture",
  "ownership-cost",
  "blob-transfer",
  "rpc-floor",
  "coordinator-unary",
  "coordinator-load",
  "lease-cycles",
  "video-verify",
  "dashboard-devices",
  "devsim-pull",
  "app-endpoint",
  "cli-cold-start",
  "ocr-frame",
  "policy-explain",
  "redaction",
  "session-steps",
  "capture-cost",
  "replicas",
  "byte-store",
  "adb-tunnel",
  "adb-stalled-streams",
  "live-screen",
] as const;

const { values } = parseArgs({ options: { only: { type: "string" } } });
const only = values.only ? new Set(values.only.split(",")) : undefined;

function run(bench: string): Promise<BenchReport | { bench: string; error: string; rows?: undefined }> {
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

function table(reports: (BenchReport | { bench: string; error: string; rows?: undefined })[]): string {
  const header = ["bench", "measure", "instant (farm's own)", "realistic ratio", "target", "result"];
  const rows: string[][] = [];
  for (const r of reports) {
    if (!Array.isArray(r.rows)) {
      rows.push([r.bench, "(failed)", String((r as { error: string }).error), "", "", "FAIL"]);
      continue;
    }
    for (const row of r.rows as BenchRow[]) {
      rows.push([r.bench, row.measure, row.instant, row.realistic === null ? "—" : `${row.realistic.toFixed(2)}x ${row.profile ?? ""}`.trim(), row.target, row.pass === null ? "info" : row.pass ? "pass" : "FAIL"]);
    }
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join(" | ")} |`;
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

const reports = [];
for (const bench of BENCHES) {
  if (only && !only.has(bench)) continue;
  console.log(`\n== ${bench}`);
  reports.push(await run(bench));
}
console.log(`\n${table(reports)}`);
console.log(JSON.stringify({ benches: reports }));
