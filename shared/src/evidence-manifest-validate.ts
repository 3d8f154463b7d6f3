import { Ajv2020 } from "ajv/dist/2020.js";
import { evidenceManifestSchema } from "./evidence-manifest.js";

// Kept apart from the types: compiling the schema costs a short-lived CLI
// process more than the rest of a pull, so only callers that need it load it.
let validator: ((v: unknown) => boolean) & { errors?: unknown[] | null } | undefined;

/** Schema errors of a parsed manifest, as readable lines; empty when valid. */
export function manifestSchemaErrors(value: unknown): string[] {
  if (!validator) {
    const ajv = new Ajv2020({ allErrors: true, strict: false });
    validator = ajv.compile(evidenceManifestSchema);
  }
  if (validator(value)) return [];
  return ((validator.errors ?? []) as { instancePath: string; message?: string }[]).map((e) => `${e.instancePath || "/"} ${e.message ?? "is invalid"}`);
}
