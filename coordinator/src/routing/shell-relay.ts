import { AsyncQueue } from "@farm/shared/async-queue";
import { Errors, farmError } from "@farm/shared/errors";
import type { OpenShellResponse } from "@farm/shared/gen/farm/v1/shell_service_pb";
import type { ServeShellResponse } from "@farm/shared/gen/farm/v1/agent_shell_service_pb";

/** How long a session waits for the agent's shell stream to join it. */
export const SHELL_JOIN_TIMEOUT_MS = 15_000;

/**
 * One interactive session: the caller's stream and the agent's, joined
 * (here, or through the replica the agent's stream reaches).
 */
export interface ShellPair {
  toCaller: AsyncQueue<OpenShellResponse>;
  toAgent: AsyncQueue<ServeShellResponse>;
  /** Resolves when the agent's stream has joined; rejects when the session is cut first. */
  joined: Promise<void>;
  join(): void;
  /** Why the session was cut rather than ended (set before toCaller closes): the caller's stream fails with it. */
  readonly error: Error | undefined;
  /** Cuts the session: `joined` rejects if still waiting, toCaller ends. */
  fail(err: Error): void;
  /** The caller's side is done: nothing more goes to the agent, and whatever carries the session lets go of it. */
  end(): void;
}

/** A pair not yet joined; `onEnd` releases what carries it. */
export function shellPair(onEnd: () => void = () => {}): ShellPair {
  let join = () => {};
  let cut: (err: Error) => void = () => {};
  const joined = new Promise<void>((resolve, reject) => {
    join = resolve;
    cut = reject;
  });
  // A session can be cut while nobody waits for the join.
  joined.catch(() => {});
  let error: Error | undefined;
  const pair: ShellPair = {
    toCaller: new AsyncQueue(),
    toAgent: new AsyncQueue(),
    joined,
    join: () => join(),
    get error() {
      return error;
    },
    fail(err) {
      error ??= err;
      cut(err);
      pair.toCaller.close();
    },
    end() {
      pair.toAgent.close();
      onEnd();
    },
  };
  return pair;
}

/** Waits for the agent's stream to join, at most `ms`. */
export async function awaitJoin(pair: ShellPair, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      pair.joined,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(farmError(Errors.COMMAND_TIMEOUT, "the agent's shell stream did not arrive")), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Sessions waiting for, or joined with, their agent stream, by session id. */
export class ShellRelay {
  private readonly pairs = new Map<string, ShellPair>();

  open(sessionId: string): ShellPair {
    const pair = shellPair(() => this.close(sessionId));
    this.pairs.set(sessionId, pair);
    return pair;
  }

  /** Whether a session is open here and not yet claimed. */
  has(sessionId: string): boolean {
    return this.pairs.has(sessionId);
  }

  /** The agent's stream claims a session; each session can be claimed once. */
  claim(sessionId: string): ShellPair | undefined {
    const pair = this.pairs.get(sessionId);
    if (!pair) return undefined;
    this.pairs.delete(sessionId);
    pair.join();
    return pair;
  }

  close(sessionId: string): void {
    this.pairs.delete(sessionId);
  }
}
