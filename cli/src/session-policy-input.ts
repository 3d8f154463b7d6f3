import { readFile } from "node:fs/promises";
import { Errors } from "@farm/shared/errors";
import { parsePolicy, PolicyError } from "@farm/shared/capture-policy/policy";
import { sourceOfPath } from "@farm/shared/capture-policy/document";
import { CliError } from "./cli-error.js";

/** What `--policy FILE` and `--secret NAME` give a new session. */
export interface SessionPolicyInput {
  /** The validated policy as JSON ("" without --policy). */
  policyJson: string;
  /** Names and values; the values come from this process's environment. */
  secrets: { name: string; value: string }[];
}

/**
 * Reads and checks a session policy file and gathers the secrets it and
 * --secret name, before anything is asked of the coordinator: a bad file or
 * a missing variable fails here, naming the problem (never a value).
 */
export async function sessionPolicyInput(policyFile: string | undefined, secretNames: readonly string[], env: NodeJS.ProcessEnv): Promise<SessionPolicyInput> {
  let policyJson = "";
  let fromPolicy: string[] = [];
  if (policyFile) {
    let text: string;
    try {
      text = await readFile(policyFile, "utf8");
    } catch (err) {
      throw new CliError(Errors.INVALID_ARGUMENT, `cannot read the policy ${policyFile}: ${(err as Error).message}`, "policy");
    }
    try {
      const policy = parsePolicy(text, sourceOfPath(policyFile));
      policyJson = JSON.stringify(policy);
      fromPolicy = policy.secrets ?? [];
    } catch (err) {
      if (err instanceof PolicyError) throw new CliError(Errors.INVALID_ARGUMENT, `${policyFile}: ${err.message}`, "policy");
      throw err;
    }
  }
  const names = [...new Set([...fromPolicy, ...secretNames])];
  const secrets = names.map((name) => {
    const value = env[name];
    if (value === undefined || value === "") throw new CliError(Errors.INVALID_ARGUMENT, `secret ${name} is not set in the environment (the policy or --secret names it)`, "secret");
    return { name, value };
  });
  return { policyJson, secrets };
}
