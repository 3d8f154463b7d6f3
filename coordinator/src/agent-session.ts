import { AsyncQueue } from "@farm/shared/async-queue";
import type { AttachResponse } from "@farm/shared/gen/farm/v1/agent_service_pb";
import type { AgentSession } from "./registry.js";

/** One attached agent's control stream on the coordinator side. */
export class AttachSession implements AgentSession {
  readonly outgoing = new AsyncQueue<AttachResponse>();
  private readonly aborter = new AbortController();
  private failure: Error | undefined;

  get signal(): AbortSignal {
    return this.aborter.signal;
  }

  get error(): Error | undefined {
    return this.failure;
  }

  send(msg: AttachResponse): boolean {
    return this.outgoing.push(msg);
  }

  /** Ends the stream with an error the agent will see. */
  terminate(err: Error): void {
    if (this.aborter.signal.aborted) return;
    this.failure = err;
    this.aborter.abort(err);
    this.outgoing.close();
  }

  /** Ends the stream normally (the agent closed its side). */
  end(): void {
    if (this.aborter.signal.aborted) return;
    this.aborter.abort();
    this.outgoing.close();
  }
}
