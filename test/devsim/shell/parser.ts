import type { AndOrList, Assignment, CommandList, CommandNode, Pipeline, Redirect, SimpleCommand, Word } from "./ast.js";
import { ShellSyntaxError, plainText, tokenize, type Token } from "./tokenizer.js";

const RESERVED = new Set(["while", "until", "do", "done", "if", "then", "elif", "else", "fi", "!", "{", "}", "for", "case", "esac", "in"]);

/** Parses shell text into a command list; throws ShellSyntaxError. */
export function parseScript(text: string): CommandList {
  const parser = new Parser(tokenize(text));
  const list = parser.list(new Set());
  parser.expectEnd();
  return list;
}

class Parser {
  private pos = 0;

  constructor(private readonly tokens: Token[]) {}

  expectEnd(): void {
    const token = this.peek();
    if (token.type !== "eof") throw this.unexpected(token);
  }

  /** Sequence of and-or lists, up to EOF or one of the given reserved words. */
  list(terminators: ReadonlySet<string>): CommandList {
    const items: AndOrList[] = [];
    for (;;) {
      this.skipNewlines();
      const token = this.peek();
      if (token.type === "eof") break;
      if (token.type === "op" && token.op === ")" && terminators.has(")")) break;
      const keyword = this.keyword(token);
      if (keyword !== undefined && terminators.has(keyword)) break;
      const item = this.andOr();
      items.push(item);
      const after = this.peek();
      if (after.type === "op" && after.op === "&") {
        item.background = true;
        this.pos++;
        continue;
      }
      if (after.type === "op" && (after.op === ";" || after.op === "\n")) {
        this.pos++;
        continue;
      }
      if (after.type === "eof") break;
      if (after.type === "op" && after.op === ")" && terminators.has(")")) break;
      const nextKeyword = this.keyword(after);
      if (nextKeyword !== undefined && terminators.has(nextKeyword)) break;
      throw this.unexpected(after);
    }
    return { items };
  }

  private andOr(): AndOrList {
    const first = this.pipeline();
    const rest: AndOrList["rest"] = [];
    for (;;) {
      const token = this.peek();
      if (token.type !== "op" || (token.op !== "&&" && token.op !== "||")) break;
      this.pos++;
      this.skipNewlines();
      rest.push({ op: token.op, pipeline: this.pipeline() });
    }
    return { first, rest };
  }

  private pipeline(): Pipeline {
    let negate = false;
    if (this.keyword(this.peek()) === "!") {
      negate = true;
      this.pos++;
    }
    const commands: CommandNode[] = [this.command()];
    for (;;) {
      const token = this.peek();
      if (token.type !== "op" || token.op !== "|") break;
      this.pos++;
      this.skipNewlines();
      commands.push(this.command());
    }
    return { negate, commands };
  }

  private command(): CommandNode {
    const token = this.peek();
    if (token.type === "op" && token.op === "(") return this.subshell();
    const keyword = this.keyword(token);
    if (keyword === "while" || keyword === "until") return this.loop(keyword === "until");
    if (keyword === "if") return this.ifCommand();
    if (keyword !== undefined) {
      if (["for", "case", "{"].includes(keyword)) throw new ShellSyntaxError(`'${keyword}' is not supported by devsim`);
      throw this.unexpected(token);
    }
    return this.simple();
  }

  private subshell(): CommandNode {
    this.pos++;
    const body = this.list(new Set([")"]));
    const close = this.peek();
    if (close.type !== "op" || close.op !== ")") throw this.unexpected(close);
    this.pos++;
    return { type: "subshell", body, redirects: this.redirects() };
  }

  private loop(until: boolean): CommandNode {
    this.pos++;
    const condition = this.list(new Set(["do"]));
    this.expectKeyword("do");
    const body = this.list(new Set(["done"]));
    this.expectKeyword("done");
    return { type: "loop", until, condition, body, redirects: this.redirects() };
  }

  private ifCommand(): CommandNode {
    this.pos++;
    const branches: Array<{ condition: CommandList; body: CommandList }> = [];
    let elseBody: CommandList | undefined;
    for (;;) {
      const condition = this.list(new Set(["then"]));
      this.expectKeyword("then");
      const body = this.list(new Set(["elif", "else", "fi"]));
      branches.push({ condition, body });
      const keyword = this.keyword(this.peek());
      this.pos++;
      if (keyword === "elif") continue;
      if (keyword === "else") {
        elseBody = this.list(new Set(["fi"]));
        this.expectKeyword("fi");
      } else if (keyword !== "fi") {
        this.pos--;
        throw this.unexpected(this.peek());
      }
      break;
    }
    return { type: "if", branches, elseBody, redirects: this.redirects() };
  }

  private simple(): SimpleCommand {
    const assignments: Assignment[] = [];
    const words: Word[] = [];
    const redirects: Redirect[] = [];
    for (;;) {
      const token = this.peek();
      if (token.type === "redirect") {
        redirects.push(this.redirect());
      } else if (token.type === "word") {
        this.pos++;
        const assignment = words.length === 0 ? asAssignment(token.word) : undefined;
        if (assignment) assignments.push(assignment);
        else words.push(token.word);
      } else {
        break;
      }
    }
    if (assignments.length === 0 && words.length === 0 && redirects.length === 0) throw this.unexpected(this.peek());
    return { type: "simple", assignments, words, redirects };
  }

  private redirects(): Redirect[] {
    const redirects: Redirect[] = [];
    while (this.peek().type === "redirect") redirects.push(this.redirect());
    return redirects;
  }

  private redirect(): Redirect {
    const token = this.tokens[this.pos++]!;
    if (token.type !== "redirect") throw this.unexpected(token);
    const target = this.peek();
    if (target.type !== "word") throw this.unexpected(target);
    this.pos++;
    const fd = token.fd ?? (token.op === "<" || token.op === "<&" ? 0 : 1);
    return { fd, op: token.op, target: target.word };
  }

  private expectKeyword(keyword: string): void {
    const token = this.peek();
    if (this.keyword(token) !== keyword) throw this.unexpected(token);
    this.pos++;
  }

  /** Reserved word at command position (unquoted, exact). */
  private keyword(token: Token): string | undefined {
    if (token.type !== "word") return undefined;
    const text = plainText(token.word);
    return text !== undefined && RESERVED.has(text) ? text : undefined;
  }

  private skipNewlines(): void {
    for (;;) {
      const token = this.peek();
      if (token.type !== "op" || token.op !== "\n") return;
      this.pos++;
    }
  }

  private peek(): Token {
    return this.tokens[this.pos] ?? { type: "eof" };
  }

  private unexpected(token: Token): ShellSyntaxError {
    if (token.type === "eof") return new ShellSyntaxError("unexpected end of file", true);
    const text = token.type === "word" ? wordText(token.word) : token.type === "op" ? (token.op === "\n" ? "newline" : token.op) : token.op;
    return new ShellSyntaxError(`'${text}' unexpected`);
  }
}

function asAssignment(word: Word): Assignment | undefined {
  const [first, ...rest] = word.parts;
  if (first?.type !== "literal" || first.quoted) return undefined;
  const match = /^([A-Za-z_][A-Za-z0-9_]*)=/.exec(first.value);
  if (!match) return undefined;
  const remainder = first.value.slice(match[0].length);
  const parts = remainder ? [{ ...first, value: remainder }, ...rest] : rest;
  return { name: match[1]!, value: { parts } };
}

function wordText(word: Word): string {
  return word.parts.map((part) => (part.type === "literal" ? part.value : part.type === "command" ? `$(${part.script})` : `$${part.name}`)).join("");
}
