import type { RedirectOp, Word, WordPart } from "./ast.js";

export type Operator = ";" | "\n" | "&&" | "||" | "|" | "&" | "(" | ")" | ";;";

export type Token =
  | { type: "word"; word: Word }
  | { type: "op"; op: Operator }
  | { type: "redirect"; op: RedirectOp; fd: number | undefined }
  | { type: "eof" };

/**
 * A syntax error. `incomplete` marks input that may become valid with more
 * text (an open quote, a trailing &&, a missing `done`), which an interactive
 * shell answers by reading another line.
 */
export class ShellSyntaxError extends Error {
  override name = "ShellSyntaxError";
  constructor(
    message: string,
    readonly incomplete = false,
  ) {
    super(message);
  }
}

const WORD_END = new Set([" ", "\t", "\n", ";", "&", "|", "<", ">", "(", ")"]);

/** Splits shell text into words, operators and redirections. */
export function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;

  while (i < text.length) {
    const c = text[i]!;
    if (c === " " || c === "\t" || c === "\r") {
      i++;
    } else if (c === "\\" && text[i + 1] === "\n") {
      i += 2; // line continuation
    } else if (c === "#") {
      while (i < text.length && text[i] !== "\n") i++;
    } else if (c === "\n") {
      tokens.push({ type: "op", op: "\n" });
      i++;
    } else if (c === ";") {
      const op = text[i + 1] === ";" ? ";;" : ";";
      tokens.push({ type: "op", op });
      i += op.length;
    } else if (c === "&" || c === "|") {
      const double = text[i + 1] === c;
      tokens.push({ type: "op", op: (double ? c + c : c) as Operator });
      i += double ? 2 : 1;
    } else if (c === "(" || c === ")") {
      tokens.push({ type: "op", op: c });
      i++;
    } else if (c === "<" || c === ">") {
      i = readRedirect(text, i, undefined, tokens);
    } else {
      const start = i;
      const [word, end] = readWord(text, i);
      i = end;
      // A word of plain digits directly followed by < or > is a file descriptor number.
      const raw = text.slice(start, end);
      if (/^[0-9]$/.test(raw) && (text[i] === "<" || text[i] === ">")) {
        i = readRedirect(text, i, Number(raw), tokens);
      } else {
        tokens.push({ type: "word", word });
      }
    }
  }
  tokens.push({ type: "eof" });
  return tokens;
}

function readRedirect(text: string, i: number, fd: number | undefined, tokens: Token[]): number {
  const c = text[i]!;
  const next = text[i + 1];
  if (c === "<" && next === "<") throw new ShellSyntaxError("here-documents are not supported by devsim");
  let op: RedirectOp;
  let length = 2;
  if (c === ">" && next === ">") op = ">>";
  else if (c === ">" && next === "&") op = ">&";
  else if (c === "<" && next === "&") op = "<&";
  else if (c === ">" && next === "|") op = ">";
  else {
    op = c === ">" ? ">" : "<";
    length = 1;
  }
  tokens.push({ type: "redirect", op, fd });
  return i + length;
}

/** Reads one word starting at i; returns it and the index after it. */
function readWord(text: string, start: number): [Word, number] {
  const parts: WordPart[] = [];
  // Adjacent literal text of the same quotedness is merged; an empty quoted
  // string ('' or "") still becomes a part, so it yields an empty argument.
  const pushLiteral = (value: string, quoted: boolean) => {
    const last = parts[parts.length - 1];
    if (last?.type === "literal" && last.quoted === quoted) last.value += value;
    else parts.push({ type: "literal", value, quoted });
  };
  const pushParam = (name: string, quoted: boolean) => parts.push({ type: "param", name, quoted });
  const pushCommand = (script: string, quoted: boolean) => parts.push({ type: "command", script, quoted });
  let i = start;

  while (i < text.length && !WORD_END.has(text[i]!)) {
    const c = text[i]!;
    if (c === "\\") {
      if (i + 1 >= text.length) throw new ShellSyntaxError("unexpected end of input after \\", true);
      if (text[i + 1] !== "\n") pushLiteral(text[i + 1]!, true); // backslash-newline: continuation
      i += 2;
    } else if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) throw new ShellSyntaxError("unterminated '", true);
      pushLiteral(text.slice(i + 1, end), true);
      i = end + 1;
    } else if (c === "\"") {
      pushLiteral("", true);
      i = readDoubleQuoted(text, i + 1, pushLiteral, pushParam, pushCommand);
    } else if (c === "$") {
      i = readParam(text, i, false, pushLiteral, pushParam, pushCommand);
    } else if (c === "`") {
      i = readBackquoted(text, i, false, pushCommand);
    } else {
      pushLiteral(c, false);
      i++;
    }
  }
  return [{ parts }, i];
}

function readDoubleQuoted(
  text: string,
  start: number,
  pushLiteral: (value: string, quoted: boolean) => void,
  pushParam: (name: string, quoted: boolean) => void,
  pushCommand: (script: string, quoted: boolean) => void,
): number {
  let i = start;
  while (i < text.length) {
    const c = text[i]!;
    if (c === "\"") return i + 1;
    if (c === "\\" && i + 1 < text.length && "$`\"\\\n".includes(text[i + 1]!)) {
      if (text[i + 1] !== "\n") pushLiteral(text[i + 1]!, true);
      i += 2;
    } else if (c === "$") {
      i = readParam(text, i, true, pushLiteral, pushParam, pushCommand);
    } else if (c === "`") {
      i = readBackquoted(text, i, true, pushCommand);
    } else {
      pushLiteral(c, true);
      i++;
    }
  }
  throw new ShellSyntaxError("unterminated \"", true);
}

/** Reads `$?`, `$NAME`, `${NAME}` at text[i] === '$'. */
function readParam(
  text: string,
  i: number,
  quoted: boolean,
  pushLiteral: (value: string, quoted: boolean) => void,
  pushParam: (name: string, quoted: boolean) => void,
  pushCommand: (script: string, quoted: boolean) => void,
): number {
  const next = text[i + 1];
  if (next === "(") {
    if (text[i + 2] === "(") throw new ShellSyntaxError("arithmetic expansion is not supported by devsim");
    const end = matchingParen(text, i + 2);
    pushCommand(text.slice(i + 2, end), quoted);
    return end + 1;
  }
  if (next === "{") {
    const end = text.indexOf("}", i + 2);
    if (end < 0) throw new ShellSyntaxError("unterminated ${", true);
    const name = text.slice(i + 2, end);
    if (!/^([A-Za-z_][A-Za-z0-9_]*|[0-9]|[?$#!])$/.test(name)) throw new ShellSyntaxError(`\${${name}}: bad substitution`);
    pushParam(name, quoted);
    return end + 1;
  }
  if (next !== undefined && "?$#!0123456789".includes(next)) {
    pushParam(next, quoted);
    return i + 2;
  }
  const match = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i + 1));
  if (match) {
    pushParam(match[0], quoted);
    return i + 1 + match[0].length;
  }
  pushLiteral("$", quoted);
  return i + 1;
}

/** Index of the `)` closing a `$(` whose body starts at start; quotes and nested substitutions respected. */
function matchingParen(text: string, start: number): number {
  let depth = 1;
  for (let i = start; i < text.length; i++) {
    const c = text[i]!;
    if (c === "\\") i++;
    else if (c === "'") {
      i = text.indexOf("'", i + 1);
      if (i < 0) break;
    } else if (c === "\"") i = closingDoubleQuote(text, i + 1);
    else if (c === "`") i = closingBackquote(text, i + 1);
    else if (c === "$" && text[i + 1] === "(") i = matchingParen(text, i + 2);
    else if (c === "(") depth++;
    else if (c === ")" && --depth === 0) return i;
  }
  throw new ShellSyntaxError("unterminated $(", true);
}

/** Index of the `"` ending a double-quoted string whose body starts at start. */
function closingDoubleQuote(text: string, start: number): number {
  for (let i = start; i < text.length; i++) {
    const c = text[i]!;
    if (c === "\\") i++;
    else if (c === "\"") return i;
    else if (c === "`") i = closingBackquote(text, i + 1);
    else if (c === "$" && text[i + 1] === "(") i = matchingParen(text, i + 2);
  }
  throw new ShellSyntaxError("unterminated \"", true);
}

function closingBackquote(text: string, start: number): number {
  for (let i = start; i < text.length; i++) {
    if (text[i] === "\\") i++;
    else if (text[i] === "`") return i;
  }
  throw new ShellSyntaxError("unterminated `", true);
}

/** `` `script` `` at text[i] === '`'. */
function readBackquoted(text: string, i: number, quoted: boolean, pushCommand: (script: string, quoted: boolean) => void): number {
  let script = "";
  for (let j = i + 1; j < text.length; j++) {
    const c = text[j]!;
    if (c === "`") {
      pushCommand(script, quoted);
      return j + 1;
    }
    if (c === "\\" && "$`\\".includes(text[j + 1] ?? "")) {
      script += text[++j];
    } else {
      script += c;
    }
  }
  throw new ShellSyntaxError("unterminated `", true);
}

/** The word's text if it is all literal text, quoted or not (no expansion in it). */
export function literalText(word: Word): string | undefined {
  let text = "";
  for (const part of word.parts) {
    if (part.type !== "literal") return undefined;
    text += part.value;
  }
  return text;
}

/** The word's text if it is entirely unquoted literal text (keywords, assignments). */
export function plainText(word: Word): string | undefined {
  if (word.parts.length !== 1) return undefined;
  const part = word.parts[0]!;
  return part.type === "literal" && !part.quoted ? part.value : undefined;
}
