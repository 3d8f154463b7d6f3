import { create } from "@bufbuild/protobuf";
import { type Code, ConnectError } from "@connectrpc/connect";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import { AsyncQueue } from "@farm/shared/async-queue";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import type { AgentCallResult } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { LinkErrorSchema, LinkResponseSchema, type CallAgentRequest, type LinkError, type LinkRequest, type LinkResponse } from "@farm/shared/gen/farm/v1/replica_service_pb";

/** Runs one forwarded call on an agent attached here; `signal` aborts when its caller went away. */
export type RunRelayedCall = (req: CallAgentRequest, signal: AbortSignal) => Promise<AgentCallResult>;

/**
 * ReplicaService.Link, this replica's side: each call on the stream runs
 * at once (calls overlap), its answer is sent when it has one, in whatever
 * order they finish; a cancel aborts the call it names. One ordered stream,
 * so a cancel never comes before its call. The other side half-closing
 * lets the calls still running answer; the stream going away aborts none
 * of them (as CallAgent's caller vanishing did not): the agent finishes
 * what it was sent, and its journal says what it did.
 */
/**
 * Calls one link may have running here at once: the same bound as the
 * concurrent HTTP/2 streams a replica's unary CallAgent calls had
 * (DEFAULT_CONNECTION_LIMITS), so a link holds no more than they could.
 */
export const MAX_LINK_CALLS = 1000;

export async function* serveLink(requests: AsyncIterable<LinkRequest>, signal: AbortSignal, run: RunRelayedCall): AsyncGenerator<LinkResponse> {
  const out = new AsyncQueue<LinkResponse>();
  const running = new Map<bigint, AbortController>();
  let reading = true;
  const closeWhenDone = () => {
    if (!reading && running.size === 0) out.close();
  };
  const answer = (id: bigint, kind: LinkResponse["kind"]) => {
    running.delete(id);
    out.push(create(LinkResponseSchema, { id, kind }));
    closeWhenDone();
  };
  const onGone = () => out.close();
  signal.addEventListener("abort", onGone, { once: true });
  void (async () => {
    try {
      for await (const req of requests) {
        if (req.kind.case === "call") {
          // An id still running is the sender's mistake: the first keeps it, this one is refused.
          if (running.has(req.id)) {
            out.push(create(LinkResponseSchema, { id: req.id, kind: { case: "error", value: linkError(invalidArgument("id", "a call with this id is already running on the link")) } }));
            continue;
          }
          if (running.size >= MAX_LINK_CALLS) {
            out.push(
              create(LinkResponseSchema, {
                id: req.id,
                kind: { case: "error", value: linkError(farmError(Errors.TOO_MANY_STREAMS, `this link already has ${running.size} calls running (at most ${MAX_LINK_CALLS}); wait for some to end`)) },
              }),
            );
            continue;
          }
          const ctl = new AbortController();
          running.set(req.id, ctl);
          const id = req.id;
          run(req.kind.value, ctl.signal).then(
            (result) => answer(id, { case: "result", value: result }),
            (err: unknown) => answer(id, { case: "error", value: linkError(err) }),
          );
        } else if (req.kind.case === "cancel") {
          // Not running (answered already): nothing to stop.
          running.get(req.id)?.abort(new Error("the caller on the other replica went away"));
        }
      }
    } catch {
      /* the other replica gone: what runs finishes on the agent, unanswered */
    }
    reading = false;
    closeWhenDone();
  })();
  try {
    yield* out;
  } finally {
    signal.removeEventListener("abort", onGone);
  }
}

/** A failure as the link carries it: status, message and the farm detail, as CallAgent's error would. */
export function linkError(err: unknown): LinkError {
  const ce = ConnectError.from(err);
  const detail = ce.findDetails(ErrorDetailSchema)[0];
  return create(LinkErrorSchema, { status: ce.code, message: ce.rawMessage, ...(detail ? { detail } : {}) });
}

/** The error a link's answer carries, raised again on the sending replica as CallAgent's would be. */
export function fromLinkError(e: LinkError): ConnectError {
  return new ConnectError(e.message, e.status as Code, undefined, e.detail ? [{ desc: ErrorDetailSchema, value: e.detail }] : []);
}
