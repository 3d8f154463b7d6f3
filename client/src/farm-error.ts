import { exitCodeFor, NOT_DISPATCHED, refusalReport, type ActionOutcome, type ErrorReport, type FarmErrorSpec } from "@farm/shared/error-codes";

/**
 * A farm failure as the client library and the CLI raise it: the stable
 * code from the one error table (@farm/shared/error-codes), a human
 * message, the offending field (a flag or option name) and what is known
 * about a device action's effect. Raised before anything is sent, it is a
 * refusal: its report says dispatched false, like every server-side
 * refusal. One raised after a call passes what is known instead (null:
 * nothing to say about a device). Only the Connect-free error table is
 * loaded here: the CLI's flag parsing raises it at start-up.
 */
export class FarmError extends Error {
  readonly code: FarmErrorSpec["code"];

  constructor(
    readonly spec: FarmErrorSpec,
    message: string,
    readonly field?: string,
    readonly outcome: ActionOutcome | null = NOT_DISPATCHED,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "FarmError";
    this.code = spec.code;
  }

  /** The process exit code the CLI gives this failure (the table's sysexits-style code). */
  get exitCode(): number {
    return exitCodeFor(this.code);
  }

  report(): ErrorReport {
    const o = this.outcome;
    if (o && o.dispatched === false && !o.ambiguous && !o.actionId) return refusalReport(this.code, this.message, this.field);
    return {
      ok: false,
      code: this.code,
      message: this.message,
      ...(this.field ? { field: this.field } : {}),
      ...(o ? { dispatched: o.dispatched, ambiguous: o.ambiguous, ...(o.actionId ? { actionId: o.actionId } : {}), ...(o.agentId ? { agentId: o.agentId } : {}) } : {}),
    };
  }
}
