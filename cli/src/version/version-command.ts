import { FARM_VERSION } from "@farm/shared/version";
import { CliError } from "../cli-error.js";
import { Errors } from "@farm/shared/error-codes";
import type { Printer } from "../output.js";
import type { versionOptions } from "../tree/misc-commands.js";
import type { Action } from "../tree/spec.js";
import { configuredCoordinator } from "./configured-coordinator.js";

const DEFAULT_TIMEOUT_MS = 1_500;

/** Prints the CLI's own version: all `farm --version` says when no coordinator is configured. */
export function printLocalVersion(printer: Printer): number {
  printer.result({ version: FARM_VERSION }, () => `farm ${FARM_VERSION}`);
  return 0;
}

/** Prints the CLI's version, and the coordinator's when one is configured ("unreachable" if it does not answer in time). */
export async function printVersion(printer: Printer, env: NodeJS.ProcessEnv, opts: { coordinator?: string | undefined; caFile?: string | undefined; timeoutMs?: number } = {}): Promise<number> {
  const configured = configuredCoordinator(opts.coordinator, env);
  if (!configured) return printLocalVersion(printer);
  // node:http and node:https only when there is a coordinator to ask.
  const { coordinatorVersion } = await import("./coordinator-version.js");
  const version = await coordinatorVersion(configured.url, { timeoutMs: opts.timeoutMs ?? DEFAULT_TIMEOUT_MS, caFile: opts.caFile ?? configured.caFile });
  printer.result({ version: FARM_VERSION, coordinator: { url: configured.url, version } }, () => `farm ${FARM_VERSION}\ncoordinator ${configured.url}: ${version}`);
  return 0;
}

/** `farm version` (hidden; the old spelling of `farm --version`), which also takes --coordinator. */
export const versionAction: Action<typeof versionOptions> = async ({ opts, args, ctx }) => {
  if (args.length > 0) throw new CliError(Errors.INVALID_ARGUMENT, "farm version takes no arguments", "command");
  return printVersion(ctx.printer, ctx.env, { coordinator: opts.coordinator, caFile: opts.caFile, timeoutMs: opts.timeout ?? DEFAULT_TIMEOUT_MS });
};
