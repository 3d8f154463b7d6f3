import type { ClientConfig } from "./config.js";

/**
 * What to tell someone with nothing configured: the CLI fell back to the
 * built-in address because no coordinator was given and no standalone's
 * address file was where it looked. Empty when a coordinator was found.
 */
export function noStandaloneNote(config: Pick<ClientConfig, "standaloneSearched">): string {
  const s = config.standaloneSearched;
  if (!s) return "";
  const home = s.farmHomeSet ? "FARM_HOME" : "FARM_HOME is unset, so the default data dir";
  return `; no coordinator is configured and no farm standalone found at ${s.path} (${home}): run \`farm standalone\`, point FARM_HOME at its data dir, or set FARM_COORDINATOR and FARM_TOKEN`;
}
