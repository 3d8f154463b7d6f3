import type { OutputFormat } from "../output.js";

/** A line of progress on stderr that updates in place; a no-op where progress is not shown. */
export interface Progress {
  update(text: string): void;
  /** Clears the line (the result is printed on stdout after it). */
  stop(): void;
}

const none: Progress = { update: () => undefined, stop: () => undefined };

/**
 * Progress is for people watching a terminal: only when stderr is a TTY
 * that has a size (a pseudo-terminal reporting 0 columns, as `script` and
 * some CI runners give, made the spinner redraw forever), the output format
 * is not json, and not in CI (a CI log is no place for spinners even when it
 * is a pseudo-terminal).
 */
export function progressShown(
  format: OutputFormat,
  env: NodeJS.ProcessEnv,
  stderrIsTty = process.stderr.isTTY === true,
  columns: number = process.stderr.columns ?? 0,
): boolean {
  return stderrIsTty && columns > 0 && format !== "json" && !("CI" in env && env["CI"] !== "" && env["CI"] !== "false") && env["TERM"] !== "dumb";
}

/** What decides whether progress is shown; stderrIsTty false for a run whose stderr is captured (main in process), undefined: the process's stderr. */
export interface ProgressContext {
  format: OutputFormat;
  env: NodeJS.ProcessEnv;
  stderrIsTty?: boolean | undefined;
}

/** Starts a spinner line (ora, loaded only when shown). */
export async function startProgress(ctx: ProgressContext, text: string): Promise<Progress> {
  if (!progressShown(ctx.format, ctx.env, ctx.stderrIsTty)) return none;
  const { default: ora } = await import("ora");
  // discardStdin off: a command may read stdin; isEnabled: the decision above is the one that counts.
  const spinner = ora({ text, stream: process.stderr, discardStdin: false, isEnabled: true }).start();
  let drawn = 0;
  return {
    update: (t) => {
      spinner.text = t;
      // ora redraws on its own timer only; a fast transfer would end before showing a byte.
      if (performance.now() - drawn >= 100) {
        drawn = performance.now();
        spinner.render();
      }
    },
    stop: () => {
      spinner.stop();
    },
  };
}

/** Runs `work` with a progress line, cleared however it ends. */
export async function withProgress<T>(ctx: ProgressContext, text: string, work: (p: Progress) => Promise<T>): Promise<T> {
  const p = await startProgress(ctx, text);
  try {
    return await work(p);
  } finally {
    p.stop();
  }
}

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

/** 1536 → "1.5 KiB". */
export function formatBytes(n: number): string {
  let v = n;
  let i = 0;
  while (v >= 1024 && i < UNITS.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${UNITS[i]}`;
}

/** Counts bytes of a transfer and renders "what: 3.2 MiB of 10.0 MiB at 1.1 MiB/s". */
export class TransferMeter {
  private bytes = 0;
  private readonly started = performance.now();

  constructor(
    private readonly what: string,
    private readonly progress: Progress,
    private total?: number,
  ) {}

  setTotal(total: number): void {
    this.total = total;
    this.render();
  }

  add(n: number): void {
    this.bytes += n;
    this.render();
  }

  get transferred(): number {
    return this.bytes;
  }

  text(): string {
    const seconds = Math.max(0.001, (performance.now() - this.started) / 1000);
    const of = this.total ? ` of ${formatBytes(this.total)}` : "";
    return `${this.what}: ${formatBytes(this.bytes)}${of} at ${formatBytes(this.bytes / seconds)}/s`;
  }

  private render(): void {
    this.progress.update(this.text());
  }
}
