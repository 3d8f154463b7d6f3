import { homedir } from "node:os";
import { join } from "node:path";

/**
 * Where `farm standalone` keeps its state by default and where the CLI looks
 * for the standalone's address and admin token. FARM_HOME overrides it.
 */
export function defaultFarmHome(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env["FARM_HOME"];
  if (explicit) return explicit;
  const xdg = env["XDG_DATA_HOME"];
  return join(xdg && xdg !== "" ? xdg : join(homedir(), ".local", "share"), "farm");
}

/** The CLI's config file: ~/.config/farm/config.json (XDG_CONFIG_HOME honoured). */
export function defaultConfigFile(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env["XDG_CONFIG_HOME"];
  return join(xdg && xdg !== "" ? xdg : join(homedir(), ".config"), "farm", "config.json");
}

/** Files `farm standalone` writes into its data dir. */
export const standaloneFiles = {
  adminToken: "admin.token",
  agentToken: "agent.token",
  address: "standalone.json",
} as const;
