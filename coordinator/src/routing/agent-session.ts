import { AsyncQueue } from "@farm/shared/async-queue";
import { randomUUID } from "node:crypto";
import { create, fromBinary, toBinary, type DescMessage, type DescMethod, type DescMethodUnary, type Message, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { actionError, Errors, farmError, relayedError } from "@farm/shared/errors";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { methodPath, rulesOf } from "@farm/shared/method-rules";
import { fromCommandError } from "./command-error.js";
import { AGENT_ANSWER_GRACE_MS, hopDeadline } from "@farm/shared/deadline";
import { AttachResponseSchema, AgentCallSchema, StepCaptureSchema, type AgentCallResult, type AttachResponse, type StepCapture, type StepEvidence } from "@farm/shared/gen/farm/v1/agent_service_pb";
import type { AgentSession } from "../registry/registry.js";
import { stageTrace } from "@farm/shared/stage-trace";

/** The method's output from an agent's result, or the agent's error. */
function decode<O extends DescMessage>(method: DescMethodUnary<DescMessage, O>, result: AgentCallResult): MessageShape<O> {
  if (result.error) throw fromCommandError(result.error);
  try {
    return fromBinary(method.output, result.response);
  } catch (err) {
    throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, `the agent's answer to ${method.name} does not decode: ${(err as Error).message}`);
  }
}

/**
 * A device change whose outcome is unknown and that names no action (the
 * agent's answer never came): whatever action the agent began is in its
 * journal, and the error says where to look.
 */
function pointToJournal(err: unknown, method: DescMethod, request: unknown): unknown {
  if (!rulesOf(method).deviceChange) return err;
  const ce = ConnectError.from(err);
  const detail = ce.findDetails(ErrorDetailSchema)[0];
  if (!detail?.ambiguous || detail.actionId) return err;
  const serial = (request as { target?: { serial?: unknown } }).target?.serial;
  const message = `${ce.rawMessage}; the outcome is unknown: if the agent began the action, \`farm device ownership status --device ${typeof serial === "string" && serial ? serial : "<serial>"}\` shows it`;
  return relayedError(ce.code, detail.code, message, detail.field || undefined, { dispatched: detail.dispatched ?? null, ambiguous: true, ...(detail.agentId ? { agentId: detail.agentId } : {}) });
}

/**
 * Calls on one agent, whichever replica holds its control stream: typed
 * calls are encoded here and exchanged as bytes by the subclass (the stream
 * itself, or the replica that holds it).
 */
export abstract class AgentCaller implements AgentSession {
  /**
   * @param tokenName the agent token its stream authenticated with: evidence
   *   ids issued for the agent are uploadable only with that token.
   */
  constructor(readonly tokenName = "") {}

  abstract terminate(err: Error): void;

  /**
   * Sends one call (method path, encoded input) and waits for the agent's
   * result until the caller's deadline. When `cancelled` aborts (the caller
   * went away) the agent is told (AgentCallCancel) and its answer, which
   * then comes soon, is still waited for: it says what was done.
   */
  abstract exchange(method: string, request: Uint8Array, by: { tokenName: string; admin: boolean }, callerDeadlineMs: number, step?: StepCapture, trace?: string, cancelled?: AbortSignal): Promise<AgentCallResult>;

  /**
   * Calls one method of a service the agent implements, by its descriptor,
   * and waits for the answer until AGENT_ANSWER_GRACE_MS past the caller's
   * deadline. The agent gets an earlier one (hopDeadline), so it answers in
   * time with what it knows (an action id, whether it was dispatched). If
   * the stream ends or no answer comes, the outcome is unknown to the
   * coordinator: the error says so, and where the agent's journal shows it.
   * The agent's error is re-raised with its code, status, field and outcome.
   */
  async call<I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    request: MessageInitShape<I>,
    by: { tokenName: string; admin: boolean },
    callerDeadlineMs: number,
    opts: {
      /** The client's trace id (FARM_STAGE_TRACE only). */
      trace?: string | undefined;
      /** Takes the agent's encoded answer as it is, or declines (undefined): then it is decoded. */
      asIs?: ((response: Uint8Array) => Message | undefined) | undefined;
      /** The caller's signal (its handler context's): its abort is passed on to the agent. */
      cancelled?: AbortSignal | undefined;
    } = {},
  ): Promise<MessageShape<O>> {
    const { trace, asIs } = opts;
    let result: AgentCallResult;
    try {
      result = await this.exchange(methodPath(method), toBinary(method.input, create(method.input, request)), by, callerDeadlineMs, undefined, trace, opts.cancelled);
    } catch (err) {
      throw pointToJournal(err, method, request);
    }
    const passed = !result.error && asIs ? asIs(result.response) : undefined;
    return passed ? (passed as MessageShape<O>) : decode(method, result);
  }

  /**
   * `call` for a step of a recorded session: the agent captures the screen
   * before and after. Never throws: the answer or the failure comes back
   * with whatever the agent captured (nothing when it never answered).
   */
  async callStep<I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    request: MessageInitShape<I>,
    by: { tokenName: string; admin: boolean },
    callerDeadlineMs: number,
    step: MessageInitShape<typeof StepCaptureSchema>,
    cancelled?: AbortSignal,
  ): Promise<{ response?: MessageShape<O>; error?: unknown; evidence?: StepEvidence }> {
    let result: AgentCallResult;
    try {
      result = await this.exchange(methodPath(method), toBinary(method.input, create(method.input, request)), by, callerDeadlineMs, create(StepCaptureSchema, step), undefined, cancelled);
    } catch (error) {
      return { error: pointToJournal(error, method, request) };
    }
    const evidence = result.step;
    try {
      return { response: decode(method, result), ...(evidence ? { evidence } : {}) };
    } catch (error) {
      return { error, ...(evidence ? { evidence } : {}) };
    }
  }
}

/** One attached agent's control stream on the coordinator side. */
export class AttachSession extends AgentCaller {
  readonly outgoing = new AsyncQueue<AttachResponse>();
  private readonly aborter = new AbortController();
  private failure: Error | undefined;
  private readonly pending = new Map<string, { resolve: (r: AgentCallResult) => void; reject: (e: Error) => void }>();

  get signal(): AbortSignal {
    return this.aborter.signal;
  }

  get error(): Error | undefined {
    return this.failure;
  }

  send(msg: AttachResponse): boolean {
    return this.outgoing.push(msg);
  }

  exchange(method: string, request: Uint8Array, by: { tokenName: string; admin: boolean }, callerDeadlineMs: number, step?: StepCapture, trace?: string, cancelled?: AbortSignal): Promise<AgentCallResult> {
    const commandId = randomUUID();
    if (trace) {
      stageTrace?.link(commandId, trace);
      stageTrace?.mark(commandId, "co.send");
    }
    const deadlineMs = hopDeadline(callerDeadlineMs);
    // A farm client listens DEADLINE_GRACE_MS past its deadline: an agent's late answer (its
    // action id) is still worth waiting for, and "no answer" still reaches the client after it.
    const waitUntil = callerDeadlineMs + AGENT_ANSWER_GRACE_MS;
    return new Promise<AgentCallResult>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(commandId);
        reject(actionError(Errors.COMMAND_TIMEOUT, `the agent did not answer within ${AGENT_ANSWER_GRACE_MS} ms after the deadline`, { dispatched: null, ambiguous: true }));
      }, Math.max(0, waitUntil - Date.now()));
      // The caller went away: the agent stops what has not reached the phone yet, and answers.
      const onCancel = () => {
        // The caller's deadline is the agent's already (an earlier one): it answers DEVICE_BUSY or COMMAND_TIMEOUT itself.
        if (ConnectError.from(cancelled?.reason).code === Code.DeadlineExceeded) return;
        if (this.pending.has(commandId)) this.send(create(AttachResponseSchema, { kind: { case: "cancel", value: { commandId } } }));
      };
      const settled = () => {
        clearTimeout(timer);
        cancelled?.removeEventListener("abort", onCancel);
      };
      this.pending.set(commandId, {
        resolve: (r) => {
          settled();
          resolve(r);
        },
        reject: (e) => {
          settled();
          reject(e);
        },
      });
      cancelled?.addEventListener("abort", onCancel, { once: true });
      const call = create(AgentCallSchema, {
        commandId,
        method,
        deadline: timestampFromMs(Math.floor(deadlineMs)),
        requestedBy: by.tokenName,
        requestedByAdmin: by.admin,
        request,
        ...(step ? { step } : {}),
      });
      if (!this.send(create(AttachResponseSchema, { kind: { case: "call", value: call } }))) {
        this.pending.get(commandId)?.reject(actionError(Errors.AGENT_OFFLINE, "the agent's stream has ended", { dispatched: false, ambiguous: false }));
        this.pending.delete(commandId);
      }
    });
  }

  /** Delivers an agent's result to the waiting caller. */
  resolve(result: AgentCallResult): void {
    const p = this.pending.get(result.commandId);
    if (!p) return; // caller already gave up
    stageTrace?.mark(result.commandId, "co.result");
    this.pending.delete(result.commandId);
    p.resolve(result);
  }

  /** Ends the stream with an error the agent will see. */
  terminate(err: Error): void {
    if (this.aborter.signal.aborted) return;
    this.failure = err;
    this.aborter.abort(err);
    this.outgoing.close();
    this.failPending();
  }

  /** Ends the stream normally (the agent closed its side). */
  end(): void {
    if (this.aborter.signal.aborted) return;
    this.aborter.abort();
    this.outgoing.close();
    this.failPending();
  }

  private failPending(): void {
    for (const p of this.pending.values()) {
      p.reject(actionError(Errors.AGENT_OFFLINE, "the agent went away before answering; the outcome is unknown", { dispatched: null, ambiguous: true }));
    }
    this.pending.clear();
  }
}
