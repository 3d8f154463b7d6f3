import { parseDocument } from "yaml";
import { DocumentError, type Problem } from "./schema-errors.js";

/** yaml: YAML 1.2 (JSON is a subset of it); json: strict JSON; auto: as yaml. */
export type DocumentSource = "yaml" | "json" | "auto";

/** Aliases expand: a few are fine, a "billion laughs" is not. */
const MAX_ALIASES = 100;

/** The source a file's extension implies: .json is JSON, anything else YAML. */
export function sourceOfPath(path: string): DocumentSource {
  if (/\.json$/i.test(path)) return "json";
  if (/\.ya?ml$/i.test(path)) return "yaml";
  return "auto";
}

/**
 * Text to a plain value. YAML is read as 1.2 with the core schema (so `on`
 * and `no` are strings, not booleans), duplicate keys refused, and every
 * syntax error reported with its line and column.
 */
export function parseText(text: string, source: DocumentSource, what: string, maxBytes: number): unknown {
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > maxBytes) throw new DocumentError(what, [{ path: "(file)", message: `is ${bytes} bytes; at most ${maxBytes}` }]);
  if (source === "json") {
    try {
      return JSON.parse(text) as unknown;
    } catch (err) {
      throw new DocumentError(what, [{ path: "(json)", message: (err as Error).message }]);
    }
  }
  const doc = parseDocument(text, { version: "1.2", schema: "core", uniqueKeys: true, prettyErrors: true, strict: true });
  const problems: Problem[] = [...doc.errors, ...doc.warnings].map((e) => ({
    path: e.linePos ? `(line ${e.linePos[0].line}, column ${e.linePos[0].col})` : "(yaml)",
    // prettyErrors appends the line and a caret; the first line says it.
    message: (e.message.split("\n")[0] ?? e.message).replace(/ at line \d+, column \d+:?$/, ""),
  }));
  if (problems.length > 0) throw new DocumentError(what, problems);
  try {
    return doc.toJS({ maxAliasCount: MAX_ALIASES }) as unknown;
  } catch (err) {
    const message = (err as Error).message;
    // `idMatches: *:id/x` reads as an alias: the usual slip.
    const quote = /alias/i.test(message) ? ` (in YAML a value starting with * is an alias: quote globs, idMatches: "*:id/checkout*")` : "";
    throw new DocumentError(what, [{ path: "(yaml)", message: message + quote }]);
  }
}
