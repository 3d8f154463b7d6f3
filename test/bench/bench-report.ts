/**
 * One shape for every benchmark's result, so `make bench` (run-all.ts) can
 * print them as one table: each row a measure, farm's own cost on an
 * instant simulated phone, the ratio a user sees on a phone under a
 * realistic latency profile (test/devsim/README.md), the target and whether
 * it was met. The last line a benchmark prints is its report as JSON.
 */
export interface BenchRow {
  measure: string;
  /** On an instant phone, where only farm's own code takes time (e.g. "+6.9 ms", "0.46 ms", "1.02x"). */
  instant: string;
  /** farm against the baseline on a phone under `profile`; null where no phone is involved. */
  realistic: number | null;
  profile?: string;
  /** The floor or baseline the figure is judged against, measured in the same run (e.g. "idle 0.3%", "bare http2 0.27 ms"). */
  baseline?: string;
  target: string;
  /** null: reported for comparison, no target. */
  pass: boolean | null;
}

export interface BenchReport {
  bench: string;
  rows: BenchRow[];
  [detail: string]: unknown;
}

/** Prints the report as the benchmark's last line. */
export function emitReport(bench: string, rows: BenchRow[], details: Record<string, unknown> = {}): void {
  console.log(JSON.stringify({ bench, rows, ...details } satisfies BenchReport));
}

export const ms = (x: number, digits = 2): string => `${x.toFixed(digits)} ms`;
export const addedMs = (x: number, digits = 2): string => `${x >= 0 ? "+" : ""}${x.toFixed(digits)} ms`;
export const round = (x: number, digits = 3): number => Number(x.toFixed(digits));
