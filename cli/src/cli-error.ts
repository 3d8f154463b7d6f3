import { NOT_DISPATCHED, refusalReport, type ActionOutcome, type ErrorReport, type FarmErrorSpec } from "@farm/shared/error-codes";

/**
 * An error raised on the client side, e.g. bad flags; its field is a flag
 * name. Raised before anything is sent, it is a refusal: its report says
 * dispatched false, like every server-side refusal. One raised after a call
 * passes what is known instead (null: nothing to say about a device). Only
 * the Connect-free error table (@farm/shared/error-codes) is loaded here:
 * flag parsing raises it at start-up.
 */
export class CliError extends Error {
  readonly code: FarmErrorSpec["code"];

  constructor(
    readonly spec: FarmErrorSpec,
    message: string,
    readonly field?: string,
    readonly outcome: ActionOutcome | null = NOT_DISPATCHED,
  ) {
    super(message);
    this.name = "CliError";
    this.code = spec.code;
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
