import type { OptionDecl } from "../options/option-decl.js";

/** The default as help and docs show it. */
export function defaultText(decl: OptionDecl<unknown>): string | undefined {
  if (decl.defaultText) return decl.defaultText;
  if (decl.kind !== "value" || decl.default === undefined) return undefined;
  return String(decl.default);
}

/** An option's help line: what it is, then its choices, default, environment variable and config key. */
export function describeOption(decl: OptionDecl<unknown>): string {
  const extras = [
    decl.choices ? `one of ${decl.choices.join(", ")}` : undefined,
    decl.required ? "required" : undefined,
    defaultText(decl) !== undefined ? `default: ${defaultText(decl)}` : undefined,
    decl.env ? `env: ${decl.env}` : undefined,
    decl.config ? `config: ${decl.config}` : undefined,
    decl.kind === "list" ? "repeatable" : undefined,
  ].filter((x) => x !== undefined);
  return extras.length ? `${decl.description} (${extras.join("; ")})` : decl.description;
}
