import { randomBytes } from "node:crypto";
import { BoundedQueue } from "@farm/shared/bounded-queue";
import { Errors, farmError } from "@farm/shared/errors";
import type { ShellInput } from "./shell-service.js";

/** Terminal input one SendShellInput call may carry (a paste is split by the browser). */
export const SHELL_INPUT_MAX_BYTES = 16 * 1024;
/** Input calls waiting for the shell: a caller sending faster than the shell takes it waits (within its deadline). */
const QUEUED_INPUTS = 32;

export interface BrowserShell {
  /** A secret of the caller's WatchShell call: SendShellInput names it. */
  readonly id: string;
  readonly owner: string;
  readonly input: BoundedQueue<ShellInput>;
  send(input: ShellInput, signal: AbortSignal): Promise<void>;
}

/**
 * Shells opened from a browser with ShellService.WatchShell: output on that
 * call, input on SendShellInput calls naming the shell, accepted only from
 * the token that opened it and only while that call lasts.
 */
export class BrowserShells {
  private readonly shells = new Map<string, BrowserShell>();

  open(owner: string): BrowserShell {
    const input = new BoundedQueue<ShellInput>(QUEUED_INPUTS);
    const id = randomBytes(18).toString("base64url");
    const shell: BrowserShell = {
      id,
      owner,
      input,
      async send(item, signal) {
        const abort = new Promise<boolean>((resolve) => signal.addEventListener("abort", () => resolve(false), { once: true }));
        if (!(await Promise.race([input.push(item), abort]))) throw farmError(Errors.NOT_FOUND, "the shell has ended", "shell_id");
      },
    };
    this.shells.set(id, shell);
    return shell;
  }

  /** The caller's open shell; another caller's is as unknown as one that never was. */
  get(id: string, owner: string): BrowserShell {
    const shell = this.shells.get(id);
    if (!shell || shell.owner !== owner) throw farmError(Errors.NOT_FOUND, "no such shell open on this coordinator for this caller", "shell_id");
    return shell;
  }

  close(shell: BrowserShell): void {
    this.shells.delete(shell.id);
    shell.input.close();
  }

  get size(): number {
    return this.shells.size;
  }
}
