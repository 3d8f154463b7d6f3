import { AsyncQueue } from "@farm/shared/async-queue";
import type { OpenShellResponse } from "@farm/shared/gen/farm/v1/shell_service_pb";
import type { ServeShellResponse } from "@farm/shared/gen/farm/v1/agent_shell_service_pb";

/** One interactive session: the caller's stream and the agent's, joined. */
export interface ShellPair {
  toCaller: AsyncQueue<OpenShellResponse>;
  toAgent: AsyncQueue<ServeShellResponse>;
  /** Resolves when the agent's stream has joined. */
  joined: Promise<void>;
  join(): void;
}

/** Sessions waiting for, or joined with, their agent stream, by session id. */
export class ShellRelay {
  private readonly pairs = new Map<string, ShellPair>();

  open(sessionId: string): ShellPair {
    let join = () => {};
    const joined = new Promise<void>((resolve) => (join = resolve));
    const pair: ShellPair = { toCaller: new AsyncQueue(), toAgent: new AsyncQueue(), joined, join };
    this.pairs.set(sessionId, pair);
    return pair;
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
