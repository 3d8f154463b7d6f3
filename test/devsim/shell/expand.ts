import type { Word } from "./ast.js";

/** Looks up a parameter's value ($?, $NAME…); undefined expands to nothing. */
export type ParamLookup = (name: string) => string | undefined;

/** Output of a command substitution, already run (expansion itself is synchronous). */
export type CommandOutput = (script: string) => string;

const noCommands: CommandOutput = () => "";

const IFS = /[ \t\n]+/;

/**
 * Expands a word into fields: quoted text is kept whole, unquoted parameter
 * values are split on whitespace (no globbing), and an empty quoted string
 * still produces one empty field.
 */
export function expandWord(word: Word, lookup: ParamLookup, commandOutput: CommandOutput = noCommands): string[] {
  const fields: string[] = [];
  let current = "";
  let started = false;
  const flush = () => {
    if (started) fields.push(current);
    current = "";
    started = false;
  };

  for (const part of word.parts) {
    if (part.type === "literal") {
      current += part.value;
      started ||= part.quoted || part.value !== "";
      continue;
    }
    const value = part.type === "command" ? commandOutput(part.script) : (lookup(part.name) ?? "");
    if (part.quoted) {
      current += value;
      started = true;
      continue;
    }
    if (value === "") continue;
    const pieces = value.split(IFS);
    pieces.forEach((piece, index) => {
      if (index > 0) flush();
      if (piece !== "") {
        current += piece;
        started = true;
      }
    });
  }
  flush();
  return fields;
}

/** Expands a word into one string without field splitting (assignments, redirect targets). */
export function expandWordToString(word: Word, lookup: ParamLookup, commandOutput: CommandOutput = noCommands): string {
  return word.parts.map((part) => (part.type === "literal" ? part.value : part.type === "command" ? commandOutput(part.script) : (lookup(part.name) ?? ""))).join("");
}
