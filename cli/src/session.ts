import { Errors } from "@farm/shared/errors";
import { CliError } from "./cli-error.js";
import { intFlag, stringFlag, type Parsed } from "./args.js";
import { resolveClientConfig, type ClientConfig } from "./config.js";
import type { CommandContext } from "./command.js";

export interface ClientSession {
  config: ClientConfig;
  /** Deadline for each RPC, propagated to the coordinator. */
  timeoutMs: number;
}

/** Resolves coordinator, token and deadline for a client command. */
export function clientSession(ctx: CommandContext, parsed: Parsed): ClientSession {
  const config = resolveClientConfig({
    flags: {
      coordinator: stringFlag(parsed, "coordinator"),
      tokenFile: stringFlag(parsed, "token-file"),
      caFile: stringFlag(parsed, "ca-file"),
      insecure: parsed.values["insecure"] === true,
    },
    env: ctx.env,
  });
  const timeoutMs = intFlag(parsed, "timeout", 100, 3_600_000) ?? 30_000;
  if (!Number.isFinite(timeoutMs)) throw new CliError(Errors.INVALID_ARGUMENT, "bad timeout", "timeout");
  return { config, timeoutMs };
}
