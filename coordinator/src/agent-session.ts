import { AsyncQueue } from "@farm/shared/async-queue";
import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { actionError, Errors, farmError } from "@farm/shared/errors";
import { fromCommandError } from "./command-error.js";
import { hopDeadline } from "@farm/shared/deadline";
import {
  AttachResponseSchema,
  AgentCommandSchema,
  type AgentCommand,
  type AttachResponse,
  type CommandResult,
} from "@farm/shared/gen/farm/v1/agent_service_pb";
import type { AgentSession } from "./registry.js";

export type CommandKind = NonNullable<AgentCommand["kind"]["case"]>;
/** The answer an agent gives to a command kind. */
export type ResultOf<K extends CommandKind> = Extract<CommandResult["kind"], { case: K }>["value"];

/** One attached agent's control stream on the coordinator side. */
export class AttachSession implements AgentSession {
  readonly outgoing = new AsyncQueue<AttachResponse>();
  /**
   * @param tokenName the agent token this stream authenticated with: evidence
   *   ids issued through this session are uploadable only with that token.
   */
  constructor(readonly tokenName = "") {}

  private readonly aborter = new AbortController();
  private failure: Error | undefined;
  private readonly pending = new Map<string, { resolve: (r: CommandResult) => void; reject: (e: Error) => void }>();

  get signal(): AbortSignal {
    return this.aborter.signal;
  }

  get error(): Error | undefined {
    return this.failure;
  }

  send(msg: AttachResponse): boolean {
    return this.outgoing.push(msg);
  }

  /**
   * Sends a command to the agent and waits for its result until the
   * caller's deadline. The agent gets an earlier one (hopDeadline), so it
   * answers in time with what it knows (an action id, whether it was
   * dispatched). If the stream ends or the caller's deadline passes first,
   * the outcome is unknown to the coordinator: the error says so, and the
   * agent's journal keeps the truth.
   */
  call(command: Pick<AgentCommand, "kind" | "requestedBy" | "requestedByAdmin">, callerDeadlineMs: number): Promise<CommandResult> {
    const commandId = randomUUID();
    const deadlineMs = hopDeadline(callerDeadlineMs);
    // Stop waiting just before the caller does, so this answer still reaches it.
    const waitUntil = callerDeadlineMs - Math.min(100, Math.max(0, callerDeadlineMs - Date.now()) * 0.05);
    return new Promise<CommandResult>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(commandId);
        reject(actionError(Errors.COMMAND_TIMEOUT, "the agent did not answer before the deadline", { dispatched: null, ambiguous: true }));
      }, Math.max(0, waitUntil - Date.now()));
      this.pending.set(commandId, {
        resolve: (r) => {
          clearTimeout(timer);
          resolve(r);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      const sent = this.send(create(AttachResponseSchema, {
          kind: {
            case: "command",
            value: create(AgentCommandSchema, { ...command, commandId, deadlineUnixMs: BigInt(Math.floor(deadlineMs)) }),
          },
        }));
      if (!sent) {
        this.pending.get(commandId)?.reject(actionError(Errors.AGENT_OFFLINE, "the agent's stream has ended", { dispatched: false, ambiguous: false }));
        this.pending.delete(commandId);
      }
    });
  }

  /**
   * `call`, typed: sends one kind of command and returns the agent's answer
   * of the same kind, re-raising its CommandError for the caller.
   */
  async request<K extends CommandKind>(
    kind: K,
    value: unknown,
    by: { tokenName: string; admin: boolean },
    callerDeadlineMs: number,
  ): Promise<ResultOf<K>> {
    const result = await this.call({ kind: { case: kind, value } as AgentCommand["kind"], requestedBy: by.tokenName, requestedByAdmin: by.admin }, callerDeadlineMs);
    if (result.kind.case === "error") throw fromCommandError(result.kind.value);
    if (result.kind.case !== kind) throw farmError(Errors.AGENT_PROTOCOL_VIOLATION, `agent answered ${result.kind.case ?? "nothing"} to ${kind}`);
    return result.kind.value as unknown as ResultOf<K>;
  }

  /** Delivers an agent's result to the waiting caller. */
  resolve(result: CommandResult): void {
    const p = this.pending.get(result.commandId);
    if (!p) return; // caller already gave up
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
