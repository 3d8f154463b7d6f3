import type { ClientConfig } from "@farm/client/config";
import { resolveClientConfig, type ConnectionSources, type ConnectionValues } from "./options/resolve.js";
import type { CommandContext } from "./tree/spec.js";

export interface ClientSession {
  config: ClientConfig & { verbose: boolean };
  /** Deadline for each RPC, propagated to the coordinator. */
  timeoutMs: number;
}

/** What a client command's action knows: its resolved connection options and where the coordinator came from. */
export interface SessionInput {
  opts: ConnectionValues & { timeout?: number | undefined };
  sources: ConnectionSources;
  ctx: Pick<CommandContext, "env" | "configFile" | "configPath"> & Partial<Pick<CommandContext, "connections" | "writeErr" | "stopSignal">>;
}

const DEFAULT_TIMEOUT_MS = 30_000;

/** Resolves coordinator, token and deadline for a client command. */
export function clientSession({ opts, sources, ctx }: SessionInput): ClientSession {
  const config = { ...resolveClientConfig(opts, sources, { env: ctx.env, file: ctx.configFile, fileName: ctx.configPath }), connections: ctx.connections, writeErr: ctx.writeErr, stopSignal: ctx.stopSignal };
  return { config, timeoutMs: opts.timeout ?? DEFAULT_TIMEOUT_MS };
}
