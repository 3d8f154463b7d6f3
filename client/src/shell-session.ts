import { create } from "@bufbuild/protobuf";
import { AsyncQueue } from "@farm/shared/async-queue";
import { Errors } from "@farm/shared/error-codes";
import { OpenShellRequestSchema, type OpenShellRequest, type OpenShellResponse } from "@farm/shared/gen/farm/v1/shell_service_pb";
import { TerminalSizeSchema } from "@farm/shared/gen/farm/v1/shell_pb";
import type { DeviceTarget } from "@farm/shared/gen/farm/v1/device_service_pb";
import { FarmError } from "./farm-error.js";
import { toFarmError } from "./to-farm-error.js";

/** A terminal's size in character cells. */
export interface TerminalSize {
  rows: number;
  cols: number;
}

/** How an interactive shell starts: the terminal it is shown in. */
export interface OpenShellOptions {
  /** The terminal's size (default 24 x 80); resize() follows changes. */
  size?: TerminalSize | undefined;
  /** TERM on the phone (default xterm-256color). */
  term?: string | undefined;
}

const CELLS_MAX = 10_000;

function sizeOf(s: TerminalSize | undefined, field: string) {
  const rows = s?.rows ?? 24;
  const cols = s?.cols ?? 80;
  for (const [name, v] of [["rows", rows], ["cols", cols]] as const) {
    if (!Number.isInteger(v) || v < 0 || v > CELLS_MAX) throw new FarmError(Errors.INVALID_ARGUMENT, `${field}.${name} must be an integer in 0..${CELLS_MAX}, got ${String(v)}`, `${field}.${name}`);
  }
  return create(TerminalSizeSchema, { rows, cols });
}

/**
 * An interactive shell on the phone (ShellService.OpenShell, as `farm
 * shell` with no command), for whatever terminal the caller has: bytes in
 * (write), the phone's terminal output out (output), resize, and the
 * shell's exit code. Nothing is buffered here: output is read from the
 * connection as the caller iterates it.
 */
export class ShellSession {
  readonly #requests = new AsyncQueue<OpenShellRequest>();
  readonly #responses: AsyncIterator<OpenShellResponse>;
  #exitCode: number | undefined;
  #ended = false;

  constructor(open: (requests: AsyncIterable<OpenShellRequest>) => AsyncIterable<OpenShellResponse>, start: OpenShellRequest) {
    this.#requests.push(start);
    this.#responses = open(this.#requests)[Symbol.asyncIterator]();
  }

  /** Bytes typed into the shell (keys as the terminal sends them: \r for Enter, \x03 for Ctrl-C). */
  write(bytes: Uint8Array | string): void {
    if (this.#ended) return;
    const value = typeof bytes === "string" ? new TextEncoder().encode(bytes) : new Uint8Array(bytes);
    this.#requests.push(create(OpenShellRequestSchema, { kind: { case: "stdin", value } }));
  }

  /** The terminal's new size. */
  resize(size: TerminalSize): void {
    const value = sizeOf(size, "size");
    if (!this.#ended) this.#requests.push(create(OpenShellRequestSchema, { kind: { case: "resize", value } }));
  }

  /**
   * The shell's output as it arrives, until the shell exits; read it once.
   * A failure of the connection is a FarmError.
   */
  async *output(): AsyncGenerator<Uint8Array> {
    try {
      for (;;) {
        const next = await this.#responses.next();
        if (next.done) break;
        const res = next.value;
        if (res.kind.case === "output") yield res.kind.value;
        else if (res.kind.case === "exitCode") this.#exitCode = res.kind.value;
      }
    } catch (err) {
      throw toFarmError(err);
    } finally {
      this.close();
    }
  }

  /**
   * The shell's exit code, once output() has ended. A shell that ended
   * without one (the agent or the coordinator went away) is
   * COORDINATOR_UNAVAILABLE, its outcome unknown.
   */
  exitCode(): number {
    if (this.#exitCode === undefined) throw new FarmError(Errors.COORDINATOR_UNAVAILABLE, "the shell session ended without an exit status (the agent or coordinator went away)", undefined, { dispatched: true, ambiguous: true });
    return this.#exitCode;
  }

  /** Hangs up: the phone's shell is ended and output() finishes. */
  close(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#requests.close();
  }
}

/** The first message of a shell: where, how large, which TERM. */
export function shellStart(target: DeviceTarget, opts: OpenShellOptions): OpenShellRequest {
  return create(OpenShellRequestSchema, { kind: { case: "start", value: { target, size: sizeOf(opts.size, "size"), term: opts.term || "xterm-256color" } } });
}
