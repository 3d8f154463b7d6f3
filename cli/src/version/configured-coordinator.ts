import { configFilePath, readConfigFile } from "@farm/client/config";

/** The coordinator a flag, FARM_COORDINATOR or the config file names; not the local standalone's default. */
export function configuredCoordinator(flagValue: string | undefined, env: NodeJS.ProcessEnv): { url: string; caFile: string | undefined } | undefined {
  let file: Record<string, unknown> = {};
  try {
    file = readConfigFile(configFilePath(env));
  } catch {
    // A broken config file is not --version's business.
  }
  const url = flagValue || env["FARM_COORDINATOR"] || (typeof file["coordinator"] === "string" ? file["coordinator"] : undefined);
  if (!url) return undefined;
  const caFile = env["FARM_CA_FILE"] || (typeof file["caFile"] === "string" ? file["caFile"] : undefined);
  return { url, caFile };
}
