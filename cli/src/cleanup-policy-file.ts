import { readFile, stat } from "node:fs/promises";
import { Errors } from "@farm/shared/errors";
import { CLEANUP_POLICY_MAX_BYTES, parseCleanupPolicy, type CleanupPolicyDoc } from "@farm/shared/cleanup/cleanup-policy";
import { CliError } from "./cli-error.js";

/** Reads and validates --cleanup FILE before the service starts: a policy it would apply wrongly stops it here, naming the field. */
export async function readCleanupPolicy(path: string): Promise<CleanupPolicyDoc> {
  let size: number;
  try {
    size = (await stat(path)).size;
  } catch (err) {
    throw new CliError(Errors.CLEANUP_POLICY_INVALID, `cannot read the cleanup policy ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, "cleanup");
  }
  // Limits before bytes are read.
  if (size > CLEANUP_POLICY_MAX_BYTES) throw new CliError(Errors.CLEANUP_POLICY_INVALID, `the cleanup policy ${path} is ${size} bytes; at most ${CLEANUP_POLICY_MAX_BYTES}`, "cleanup");
  return parseCleanupPolicy(await readFile(path, "utf8"), path);
}
