import type { ActionOutcome, ErrorReport, FarmErrorSpec } from "@farm/shared/error-codes";

/**
 * An error raised on the client side before any RPC, e.g. bad flags; its
 * field is a flag name. Only type imports here: flag parsing raises it at
 * start-up, from the Connect-free error table (@farm/shared/error-codes).
 */
export class CliError extends Error {
  readonly code: FarmErrorSpec["code"];

  constructor(
    readonly spec: FarmErrorSpec,
    message: string,
    readonly field?: string,
    /** For commands that change a device: what is known of the action (nothing was dispatched). */
    readonly outcome?: ActionOutcome,
  ) {
    super(message);
    this.name = "CliError";
    this.code = spec.code;
  }

  /** The same refusal, marked as not dispatched (a device mutation refused before sending). */
  notDispatched(): CliError {
    return this.outcome ? this : new CliError(this.spec, this.message, this.field, { dispatched: false, ambiguous: false });
  }

  report(): ErrorReport {
    return {
      ok: false,
      code: this.code,
      message: this.message,
      ...(this.field ? { field: this.field } : {}),
      ...(this.outcome ? { dispatched: this.outcome.dispatched, ambiguous: this.outcome.ambiguous } : {}),
    };
  }
}
