import { randomUUID } from "node:crypto";
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { actionError, Errors, farmError, type ActionOutcome } from "@farm/shared/errors";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { AgentCallSchema, type AgentCallResult, type StepCapture } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { RelayShellRequestSchema, type RelayShellRequest, type ReplicaService } from "@farm/shared/gen/farm/v1/replica_service_pb";
import { DEADLINE_GRACE_MS } from "@farm/shared/deadline";
import { AgentCaller } from "../routing/agent-session.js";
import { shellPair, type ShellPair } from "../routing/shell-relay.js";
import type { ReplicaClients } from "./replica-clients.js";

/** How long an attaching agent waits for the replica that held its stream to say whether it still does. */
const HOLDS_TIMEOUT_MS = 2_000;
/** How long a cancel is given to reach the replica holding the agent (a small unary call between replicas). */
const CANCEL_TIMEOUT_MS = 2_000;

/**
 * An agent whose control stream another replica holds: calls on it travel
 * to that replica (ReplicaService.CallAgent), which exchanges them with the
 * agent. Everything else about the call (access, lease, activity, session
 * step) was decided here, where the call landed.
 */
export class RemoteAgentSession extends AgentCaller {
  constructor(
    readonly agentId: string,
    readonly replicaId: string,
    tokenName: string,
    private readonly clients: ReplicaClients,
  ) {
    super(tokenName);
  }

  /** The stream is not ours to end; the replica that holds it does (it hears the agent moved or was removed). */
  terminate(): void {}

  /** Whether the replica holding the stream still has it open; false when that replica does not answer in time. */
  async stillHeld(): Promise<boolean> {
    const client = this.clients.client(this.replicaId);
    if (!client) return false;
    try {
      return (await client.holdsAgent({ agentId: this.agentId }, { timeoutMs: HOLDS_TIMEOUT_MS })).held;
    } catch {
      // Unreachable or too slow: the agent reconnecting here is more likely than a copy of it.
      return false;
    }
  }

  async exchange(method: string, request: Uint8Array, by: { tokenName: string; admin: boolean }, callerDeadlineMs: number, step?: StepCapture, _trace?: string, cancelled?: AbortSignal): Promise<AgentCallResult> {
    const client = this.clients.client(this.replicaId);
    if (!client) throw actionError(Errors.AGENT_OFFLINE, `the coordinator replica holding agent ${this.agentId} is gone`, { dispatched: false, ambiguous: false });
    const call = create(AgentCallSchema, { method, requestedBy: by.tokenName, requestedByAdmin: by.admin, request, ...(step ? { step } : {}) });
    // The holding replica waits for the agent past the caller's deadline (AgentCaller.call): listen as long as a farm client does.
    const timeoutMs = Math.max(1, callerDeadlineMs - Date.now()) + DEADLINE_GRACE_MS;
    const callerDeadline = BigInt(Math.floor(callerDeadlineMs));
    const link = this.clients.link(this.replicaId);
    if (link) {
      const sent = link.call({ agentId: this.agentId, call, callerDeadlineMs: callerDeadline }, timeoutMs);
      try {
        return await this.answered(sent.answer, cancelled, () => sent.cancel());
      } catch (err) {
        // A replica without Link (an older build) ran nothing: the call goes by CallAgent below.
        if (!(link.unsupported && ConnectError.from(err).code === Code.Unimplemented)) throw err;
      }
    }
    const relayId = randomUUID();
    // Lost on the way, the cancel leaves the call to run as if it had not been sent: nothing more to tell.
    const cancel = () => void client.cancelAgentCall({ agentId: this.agentId, relayId }, { timeoutMs: CANCEL_TIMEOUT_MS }).catch(() => {});
    const answer = client.callAgent({ agentId: this.agentId, call, callerDeadlineMs: callerDeadline, relayId }, { timeoutMs }).then((res) => {
      if (!res.result) throw actionError(Errors.AGENT_PROTOCOL_VIOLATION, "the replica holding the agent sent no result", { dispatched: null, ambiguous: true });
      return res.result;
    });
    return this.answered(answer, cancelled, cancel);
  }

  /**
   * A forwarded call's answer. The caller going away is passed on (`cancel`):
   * the holding replica tells the agent, and the call still brings its answer
   * (as AttachSession.exchange). A failure with the other replica's own error
   * is its answer; any other is the hop lost, the call's outcome unknown.
   */
  private async answered(answer: Promise<AgentCallResult>, cancelled: AbortSignal | undefined, cancel: () => void): Promise<AgentCallResult> {
    const onCancel = () => {
      // A deadline is the agent's already (an earlier one): it answers for itself.
      if (ConnectError.from(cancelled?.reason).code === Code.DeadlineExceeded) return;
      cancel();
    };
    cancelled?.addEventListener("abort", onCancel, { once: true });
    if (cancelled?.aborted) onCancel();
    try {
      return await answer;
    } catch (err) {
      const ce = ConnectError.from(err);
      // The other replica's own answer (agent offline there, a deadline it judged): it knows the outcome.
      if (ce.findDetails(ErrorDetailSchema).length > 0) throw ce;
      // A replica without Link: not the hop lost (the caller above goes by CallAgent).
      if (ce.code === Code.Unimplemented) throw ce;
      // The hop itself failed: the call may or may not have reached the agent.
      throw actionError(Errors.AGENT_OFFLINE, `lost the coordinator replica holding agent ${this.agentId} mid-call: ${ce.rawMessage}`, { dispatched: null, ambiguous: true });
    } finally {
      cancelled?.removeEventListener("abort", onCancel);
    }
  }

  /**
   * Opens an interactive shell session on the replica holding the agent
   * (the agent's ServeShell stream goes there) and carries it here. Ready
   * when that replica has the session open, before the agent is told to
   * start it. Losing that replica, or hearing it is gone, cuts the session.
   */
  async openShell(sessionId: string, deadlineMs: number): Promise<ShellPair> {
    const client = this.clients.client(this.replicaId);
    if (!client) throw actionError(Errors.AGENT_OFFLINE, `the coordinator replica holding agent ${this.agentId} is gone`, { dispatched: false, ambiguous: false });
    const stop = new AbortController();
    let ended = false;
    const pair = shellPair(() => {
      ended = true;
      stop.abort();
    });
    const gone = this.clients.goneSignal(this.replicaId);
    // A replica killed outright may leave its connection open (no FIN): its missed heartbeats tell.
    const onGone = () => stop.abort(new Error("it stopped heartbeating"));
    gone.addEventListener("abort", onGone, { once: true });
    if (gone.aborted) onGone();
    const toAgent = pair.toAgent;
    async function* requests(): AsyncGenerator<RelayShellRequest> {
      yield create(RelayShellRequestSchema, { kind: { case: "sessionId", value: sessionId } });
      for await (const m of toAgent) yield create(RelayShellRequestSchema, { kind: { case: "toAgent", value: m } });
    }
    const responses = client.relayShell(requests(), { signal: stop.signal })[Symbol.asyncIterator]();
    const timer = setTimeout(
      () => stop.abort(farmError(Errors.COMMAND_TIMEOUT, `the coordinator replica holding agent ${this.agentId} did not open the shell session in time`)),
      Math.max(1, deadlineMs - Date.now()),
    );
    try {
      const first = await responses.next();
      if (first.done || first.value.kind.case !== "ready") throw actionError(Errors.AGENT_PROTOCOL_VIOLATION, "the replica holding the agent did not open the shell session", { dispatched: false, ambiguous: false });
    } catch (err) {
      gone.removeEventListener("abort", onGone);
      pair.end();
      throw this.hopError(err, "opening a shell session", { dispatched: false, ambiguous: false });
    } finally {
      clearTimeout(timer);
    }
    // That replica -> the caller, in the background.
    void (async () => {
      let joined = false;
      try {
        for (;;) {
          const r = await responses.next();
          if (r.done) break;
          if (r.value.kind.case === "joined") {
            joined = true;
            pair.join();
          } else if (r.value.kind.case === "toCaller") pair.toCaller.push(r.value.kind.value);
        }
        // Ended before the agent joined: that replica gave up waiting.
        if (!joined && !ended) pair.fail(farmError(Errors.COMMAND_TIMEOUT, "the agent's shell stream did not arrive"));
      } catch (err) {
        // Once joined, the shell runs on the device; what it did is in the agent's journal.
        if (!ended) pair.fail(this.hopError(err, "mid-session", joined ? { dispatched: true, ambiguous: false } : { dispatched: null, ambiguous: true }));
      } finally {
        gone.removeEventListener("abort", onGone);
        pair.toCaller.close();
      }
    })();
    return pair;
  }

  /**
   * The way to the replica holding the agent, for a stream carried through
   * it (live screen, adb tunnel): its client, and a signal that aborts when
   * that replica is gone (a replica killed outright may leave its connection
   * open; its missed heartbeats tell).
   */
  link(): { client: Client<typeof ReplicaService>; gone: AbortSignal } {
    const client = this.clients.client(this.replicaId);
    if (!client) throw actionError(Errors.AGENT_OFFLINE, `the coordinator replica holding agent ${this.agentId} is gone`, { dispatched: false, ambiguous: false });
    return { client, gone: this.clients.goneSignal(this.replicaId) };
  }

  /** A failure of the stream to the other replica: its own answer as it is, the hop's loss as AGENT_OFFLINE. */
  hopError(err: unknown, when: string, outcome: ActionOutcome): Error {
    const ce = ConnectError.from(err);
    if (ce.findDetails(ErrorDetailSchema).length > 0) return ce;
    return actionError(Errors.AGENT_OFFLINE, `lost the coordinator replica holding agent ${this.agentId} ${when}: ${ce.rawMessage}`, { ...outcome, agentId: this.agentId });
  }
}
