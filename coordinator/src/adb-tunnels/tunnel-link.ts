import { create } from "@bufbuild/protobuf";
import { AsyncQueue } from "@farm/shared/async-queue";
import { Errors, farmError } from "@farm/shared/errors";
import { RelayAdbStreamRequestSchema, RelayTunnelRequestSchema, type RelayAdbStreamRequest, type RelayTunnelRequest } from "@farm/shared/gen/farm/v1/replica_service_pb";
import { linkedAbort } from "../replicas/linked-abort.js";
import type { RemoteAgentSession } from "../replicas/remote-agent-session.js";
import type { AdbStreamPair } from "./adb-stream-relay.js";
import { ByteQueue } from "./byte-queue.js";

/** Bytes for the device are passed on in pieces no larger than this: well under ReplicaService's message cap. */
export const RELAY_DATA_CHUNK_BYTES = 256 * 1024;
/** How long the agent's replica gets to stop a tunnel after being told why, before the link is cut. */
const CLOSE_GRACE_MS = 10_000;

const notDispatched = { dispatched: false, ambiguous: false };

/**
 * A tunnel opened through the replica holding the phone's agent
 * (ReplicaService.RelayTunnel): that replica started it on the agent and
 * holds it for as long as this link lasts, so a tunnel whose caller's
 * replica dies is stopped on the agent all the same.
 */
export interface TunnelLink {
  actionId: string;
  /** Why the agent's replica ended the tunnel, or the link was lost; never rejects. */
  readonly ended: Promise<Error>;
  /** Ends the tunnel; `reason` goes to the agent's journal. */
  close(reason: string): void;
  /**
   * One adb stream of the tunnel, carried by ReplicaService.RelayAdbStream:
   * `joined` resolves once the device accepted the service. Each side reads
   * only as fast as the other drains (bounded queues, HTTP/2 flow control).
   * `onCut` hears a failure after the join; `signal` cuts the stream.
   */
  openStream(service: string, requestedBy: string, signal: AbortSignal, onCut: (err: Error) => void): AdbStreamPair;
}

export async function openTunnelLink(
  session: RemoteAgentSession,
  start: { tunnelId: string; serial: string; physicalId: string; leaseId: string; requestedBy: string },
  deadlineMs: number,
): Promise<TunnelLink> {
  const { client, gone } = session.link();
  const stop = new AbortController();
  const linked = linkedAbort(stop.signal, gone);
  const signal = linked.signal;
  const requests = new AsyncQueue<RelayTunnelRequest>();
  requests.push(create(RelayTunnelRequestSchema, { kind: { case: "start", value: { agentId: session.agentId, ...start } } }));
  const responses = client.relayTunnel(requests, { signal })[Symbol.asyncIterator]();
  const lost = (err: unknown, when: string) => session.hopError(gone.aborted ? new Error("it stopped heartbeating") : err, when, notDispatched);
  const timer = setTimeout(
    () => stop.abort(farmError(Errors.COMMAND_TIMEOUT, `the coordinator replica holding agent ${session.agentId} did not open the tunnel in time`)),
    Math.max(1, deadlineMs - Date.now()),
  );
  let actionId: string;
  try {
    const first = await responses.next();
    if (first.done || first.value.kind.case !== "actionId") throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, "the replica holding the agent did not open the tunnel", undefined, notDispatched);
    actionId = first.value.kind.value;
  } catch (err) {
    requests.close();
    stop.abort();
    linked.dispose();
    throw stop.signal.reason instanceof Error ? stop.signal.reason : lost(err, "opening the remote adb tunnel");
  } finally {
    clearTimeout(timer);
  }
  const ended = (async (): Promise<Error> => {
    try {
      while (!(await responses.next()).done);
      return farmError(Errors.TUNNEL_CLOSED, "the coordinator replica holding the agent closed the tunnel");
    } catch (err) {
      return lost(err, "while the tunnel was open");
    } finally {
      requests.close();
      stop.abort();
      linked.dispose();
    }
  })();
  return {
    actionId,
    ended,
    close(reason) {
      requests.push(create(RelayTunnelRequestSchema, { kind: { case: "closeReason", value: reason } }));
      requests.close();
      const t = setTimeout(() => stop.abort(), CLOSE_GRACE_MS);
      t.unref();
      void ended.finally(() => clearTimeout(t));
    },
    openStream(service, requestedBy, cutSignal, onCut) {
      let join = () => {};
      let refuse: (err: Error) => void = () => {};
      const joined = new Promise<void>((resolve, reject) => {
        join = resolve;
        refuse = reject;
      });
      joined.catch(() => undefined);
      const pair: AdbStreamPair = { toCaller: new ByteQueue(), toAgent: new ByteQueue(), joined };
      async function* out(): AsyncGenerator<RelayAdbStreamRequest> {
        yield create(RelayAdbStreamRequestSchema, { kind: { case: "start", value: { tunnelId: start.tunnelId, service, requestedBy } } });
        for await (const bytes of pair.toAgent) {
          for (let at = 0; at < bytes.length; at += RELAY_DATA_CHUNK_BYTES) {
            yield create(RelayAdbStreamRequestSchema, { kind: { case: "data", value: bytes.subarray(at, at + RELAY_DATA_CHUNK_BYTES) } });
          }
        }
      }
      const streamAbort = linkedAbort(cutSignal, signal);
      void (async () => {
        let opened = false;
        let ended = false;
        try {
          for await (const m of client.relayAdbStream(out(), { signal: streamAbort.signal })) {
            if (m.kind.case === "opened") {
              opened = true;
              join();
            } else if (m.kind.case === "data") {
              // Not read further until the caller's side takes it: the agent's replica waits, and so does the phone.
              if (!(await pair.toCaller.push(m.kind.value))) break;
            } else if (m.kind.case === "end") {
              // The phone's side ended: the caller hears it now; the call's own end follows.
              ended = true;
              pair.toCaller.close();
            }
          }
          if (!opened) refuse(farmError(Errors.TUNNEL_CLOSED, "the adb stream ended before the device accepted it"));
        } catch (err) {
          // After the phone's end was passed on, the call's own end has nothing left to say.
          if (!cutSignal.aborted && !ended) {
            const e = lost(err, "mid-stream");
            refuse(e);
            if (opened) onCut(e);
          }
        } finally {
          streamAbort.dispose();
          pair.toCaller.close();
          pair.toAgent.close();
        }
      })();
      return pair;
    },
  };
}
