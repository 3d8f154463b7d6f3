import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { AsyncQueue } from "@farm/shared/async-queue";
import type { AgentCallResult } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { LinkRequestSchema, type CallAgentRequestSchema, type LinkRequest, type ReplicaService } from "@farm/shared/gen/farm/v1/replica_service_pb";
import { fromLinkError } from "./link-server.js";

interface Pending {
  resolve(result: AgentCallResult): void;
  reject(err: unknown): void;
  timer: NodeJS.Timeout;
}

/**
 * This replica's end of ReplicaService.Link to one other replica: forwarded
 * agent calls as messages on one long-lived stream (opened at the first
 * call), matched to their answers by id. What a per-call unary CallAgent
 * paid each time (an HTTP/2 stream, its headers and trailers, the other
 * side's credential check and per-call handler setup) is paid once per
 * stream. A link that ends fails the calls waiting on it (their outcome
 * unknown here) and is replaced at the next call; one the other replica
 * does not know (UNIMPLEMENTED, an older build) is marked `unsupported`.
 */
export class ReplicaLink {
  #nextId = 1n;
  readonly #pending = new Map<bigint, Pending>();
  readonly #out = new AsyncQueue<LinkRequest>();
  readonly #stop = new AbortController();
  #closed = false;
  #unsupported = false;

  constructor(client: Client<typeof ReplicaService>, gone: AbortSignal) {
    const onGone = () => this.#stop.abort();
    gone.addEventListener("abort", onGone, { once: true });
    if (gone.aborted) onGone();
    void (async () => {
      let failure = new ConnectError("the other replica ended the link", Code.Unavailable);
      try {
        for await (const res of client.link(this.#out, { signal: this.#stop.signal })) {
          const p = this.#pending.get(res.id);
          // Given up on here already (its time ran out): the answer has no one to go to.
          if (!p) continue;
          this.#pending.delete(res.id);
          clearTimeout(p.timer);
          if (res.kind.case === "result") p.resolve(res.kind.value);
          else if (res.kind.case === "error") p.reject(fromLinkError(res.kind.value));
          else p.reject(new ConnectError("the replica holding the agent sent an empty answer", Code.Internal));
        }
      } catch (err) {
        // The link's own failure, its details dropped: no call on it was answered, whatever they say.
        const ce = ConnectError.from(err);
        failure = new ConnectError(ce.rawMessage, ce.code);
        if (ce.code === Code.Unimplemented) this.#unsupported = true;
      }
      gone.removeEventListener("abort", onGone);
      this.#close(failure);
    })();
  }

  /** Ended: the next call needs a new link. */
  get closed(): boolean {
    return this.#closed;
  }

  /** The other replica has no Link (an older build): its calls go by CallAgent. */
  get unsupported(): boolean {
    return this.#unsupported;
  }

  /**
   * Sends one call; its answer, the other replica's error for it, or (no
   * answer within `timeoutMs`, or the link lost) an error with no farm
   * detail. `cancel()` tells the other replica its caller went away.
   */
  call(req: MessageInitShape<typeof CallAgentRequestSchema>, timeoutMs: number): { answer: Promise<AgentCallResult>; cancel(): void } {
    const id = this.#nextId++;
    const answer = new Promise<AgentCallResult>((resolve, reject) => {
      if (this.#closed) {
        reject(new ConnectError("the link to the replica holding the agent is closed", Code.Unavailable));
        return;
      }
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new ConnectError("the replica holding the agent did not answer in time", Code.DeadlineExceeded));
      }, timeoutMs);
      this.#pending.set(id, { resolve, reject, timer });
      this.#out.push(create(LinkRequestSchema, { id, kind: { case: "call", value: req } }));
    });
    return {
      answer,
      cancel: () => {
        if (this.#pending.has(id)) this.#out.push(create(LinkRequestSchema, { id, kind: { case: "cancel", value: true } }));
      },
    };
  }

  /** Ends the link (this replica stopping, or the other one gone). */
  close(): void {
    this.#stop.abort();
  }

  #close(failure: ConnectError): void {
    this.#closed = true;
    this.#out.close();
    for (const [id, p] of this.#pending) {
      this.#pending.delete(id);
      clearTimeout(p.timer);
      p.reject(failure);
    }
  }
}
