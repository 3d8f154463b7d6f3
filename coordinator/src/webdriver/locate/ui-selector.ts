import { RE2JS } from "re2js";
import type { UiElement } from "@farm/shared/gen/farm/v1/ui_pb";
import { WebDriverError } from "../webdriver-error.js";

/**
 * Appium's `-android uiautomator` locator: Java source such as
 * `new UiSelector().className("android.widget.Button").textContains("Buy").instance(1)`,
 * read by a small tokenizer and a recursive-descent parser (never
 * evaluated). Statements may be joined by `;` (their matches are united,
 * as Appium does). `new` and `UiSelector()` may be left out
 * (`.text("OK")`, `text("OK")`).
 *
 * Regular expressions (`textMatches` …) use RE2 syntax in linear time
 * (re2js), so a hostile pattern cannot stall the coordinator; like Java's
 * `matches()` they must match the whole value. Anything else — a method
 * farm's tree cannot answer, UiScrollable, a wrong argument — is an
 * `invalid selector` error naming it.
 */
export interface UiSelectorQuery {
  readonly criteria: readonly Criterion[];
  /** The n-th match (0-based, document order) of the criteria, when given. */
  readonly instance?: number;
  /** Descendants of each match that match this one (UiSelector.childSelector). */
  readonly child?: UiSelectorQuery;
}

/** One condition of a selector: the method that set it, and the test (`index` is the element's position among its parent's children). */
export interface Criterion {
  readonly method: string;
  readonly test: (e: UiElement, index: number) => boolean;
}

/** childSelector() nesting deeper than this is refused (the parser recurses). */
const MAX_NESTING = 16;

type Token =
  | { kind: "ident"; text: string; pos: number }
  | { kind: "string"; value: string; pos: number }
  | { kind: "number"; value: number; pos: number }
  | { kind: "punct"; text: "(" | ")" | "." | ";" | ","; pos: number }
  | { kind: "end"; pos: number };

function invalid(message: string): WebDriverError {
  return new WebDriverError("invalid selector", `-android uiautomator: ${message}`);
}

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < source.length) {
    const c = source[i] as string;
    if (/\s/.test(c)) {
      i++;
    } else if (/[A-Za-z_$]/.test(c)) {
      const start = i;
      while (i < source.length && /[\w$]/.test(source[i] as string)) i++;
      tokens.push({ kind: "ident", text: source.slice(start, i), pos: start });
    } else if (/[-\d]/.test(c)) {
      const m = /^-?\d+/.exec(source.slice(i, i + 12));
      if (!m) throw invalid(`unexpected ${JSON.stringify(c)} at position ${i}`);
      if (m[0].replace("-", "").length > 9) throw invalid(`the number at position ${i} is too large`);
      tokens.push({ kind: "number", value: Number(m[0]), pos: i });
      i += m[0].length;
      if (i < source.length && /[\w$]/.test(source[i] as string)) throw invalid(`unexpected ${JSON.stringify(source[i])} at position ${i}`);
    } else if (c === "\"") {
      const start = i;
      const { value, end } = readString(source, i);
      tokens.push({ kind: "string", value, pos: start });
      i = end;
    } else if (c === "(" || c === ")" || c === "." || c === ";" || c === ",") {
      tokens.push({ kind: "punct", text: c, pos: i });
      i++;
    } else {
      throw invalid(`unexpected ${JSON.stringify(c)} at position ${i}`);
    }
  }
  tokens.push({ kind: "end", pos: source.length });
  return tokens;
}

const SIMPLE_ESCAPES: Record<string, string> = { "\"": "\"", "'": "'", "\\": "\\", n: "\n", t: "\t", r: "\r", b: "\b", f: "\f", s: " " };

/** A Java string literal starting at `start` (the opening quote). */
function readString(source: string, start: number): { value: string; end: number } {
  let i = start + 1;
  let value = "";
  while (i < source.length) {
    const c = source[i] as string;
    if (c === "\"") return { value, end: i + 1 };
    if (c === "\n") break;
    if (c !== "\\") {
      value += c;
      i++;
      continue;
    }
    const e = source[i + 1];
    if (e === "u") {
      const hex = /^[0-9A-Fa-f]{4}/.exec(source.slice(i + 2, i + 6));
      if (!hex) throw invalid(`bad \\u escape at position ${i}`);
      value += String.fromCharCode(parseInt(hex[0], 16));
      i += 6;
    } else if (e !== undefined && /[0-7]/.test(e)) {
      // Java's octal escapes: up to three digits, at most \377.
      const oct = (/^[0-3][0-7]{0,2}|^[4-7][0-7]?/.exec(source.slice(i + 1, i + 4)) as RegExpExecArray)[0];
      value += String.fromCharCode(parseInt(oct, 8));
      i += 1 + oct.length;
    } else if (e !== undefined && Object.hasOwn(SIMPLE_ESCAPES, e)) {
      value += SIMPLE_ESCAPES[e] as string;
      i += 2;
    } else {
      throw invalid(`bad escape ${JSON.stringify(`\\${e ?? ""}`)} at position ${i}`);
    }
  }
  throw invalid(`the string starting at position ${start} is not closed`);
}

type Arg = { kind: "string"; value: string } | { kind: "number"; value: number } | { kind: "boolean"; value: boolean } | { kind: "selector"; value: UiSelectorQuery };

type Method = (arg: Arg, name: string) => { criterion?: Criterion; instance?: number; child?: UiSelectorQuery };

const stringArg = (arg: Arg, name: string): string => {
  if (arg.kind !== "string") throw invalid(`${name}() takes a string`);
  return arg.value;
};
const boolArg = (arg: Arg, name: string): boolean => {
  if (arg.kind !== "boolean") throw invalid(`${name}() takes true or false`);
  return arg.value;
};
const countArg = (arg: Arg, name: string): number => {
  if (arg.kind !== "number" || arg.value < 0) throw invalid(`${name}() takes a whole number, 0 or more`);
  return arg.value;
};
const regexArg = (arg: Arg, name: string): RE2JS => {
  const pattern = stringArg(arg, name);
  try {
    return RE2JS.compile(pattern);
  } catch (e) {
    throw invalid(`${name}(${JSON.stringify(pattern)}) is not a regular expression farm can run (RE2 syntax): ${(e as Error).message}`);
  }
};

type Field = "text" | "resourceId" | "contentDesc" | "type" | "packageName";

function stringMethods(prefix: string, field: Field): Record<string, Method> {
  const crit = (name: string, test: (e: UiElement) => boolean): { criterion: Criterion } => ({ criterion: { method: name, test } });
  return {
    [prefix]: (a, n) => {
      const v = stringArg(a, n);
      return crit(n, (e) => e[field] === v);
    },
    [`${prefix}Contains`]: (a, n) => {
      const v = stringArg(a, n);
      return crit(n, (e) => e[field].includes(v));
    },
    [`${prefix}StartsWith`]: (a, n) => {
      const v = stringArg(a, n);
      return crit(n, (e) => e[field].startsWith(v));
    },
    [`${prefix}Matches`]: (a, n) => {
      const re = regexArg(a, n);
      return crit(n, (e) => re.matches(e[field]));
    },
  };
}

function flagMethod(field: "clickable" | "enabled" | "focused"): Method {
  return (a, n) => {
    const v = boolArg(a, n);
    return { criterion: { method: n, test: (e) => e[field] === v } };
  };
}

const METHODS: Record<string, Method> = {
  ...stringMethods("text", "text"),
  ...stringMethods("description", "contentDesc"),
  ...stringMethods("className", "type"),
  ...stringMethods("packageName", "packageName"),
  resourceId: (a, n) => {
    const v = stringArg(a, n);
    return { criterion: { method: n, test: (e) => e.resourceId === v } };
  },
  resourceIdMatches: (a, n) => {
    const re = regexArg(a, n);
    return { criterion: { method: n, test: (e) => re.matches(e.resourceId) } };
  },
  clickable: flagMethod("clickable"),
  enabled: flagMethod("enabled"),
  focused: flagMethod("focused"),
  index: (a, n) => {
    const v = countArg(a, n);
    return { criterion: { method: n, test: (_e, index) => index === v } };
  },
  instance: (a, n) => ({ instance: countArg(a, n) }),
  childSelector: (a, n) => {
    if (a.kind !== "selector") throw invalid(`${n}() takes a UiSelector`);
    return { child: a.value };
  },
};

/** UiSelector methods farm's tree cannot answer, and why (named in the error rather than "unknown method"). */
const UNANSWERABLE: Record<string, string> = {
  checkable: "farm's UI tree does not record whether an element is checkable",
  checked: "farm's UI tree does not record whether an element is checked",
  focusable: "farm's UI tree does not record whether an element is focusable",
  longClickable: "farm's UI tree does not record whether an element is long-clickable",
  scrollable: "farm's UI tree does not record whether an element is scrollable",
  selected: "farm's UI tree does not record whether an element is selected",
  fromParent: "farm does not support fromParent(); select the parent and use childSelector()",
};

/** The `;`-separated statements of a `-android uiautomator` selector, parsed. */
export function parseUiSelector(source: string): UiSelectorQuery[] {
  const p = new Parser(tokenize(source));
  const statements: UiSelectorQuery[] = [];
  while (p.peek().kind !== "end") {
    if (p.isPunct(";")) {
      p.next();
      continue;
    }
    statements.push(p.selector(0, true));
    const t = p.peek();
    if (t.kind !== "end" && !(t.kind === "punct" && t.text === ";")) throw invalid(`unexpected ${describe(t)} at position ${t.pos}`);
  }
  if (statements.length === 0) throw invalid("no UiSelector given");
  return statements;
}

function describe(t: Token): string {
  switch (t.kind) {
    case "ident":
      return `"${t.text}"`;
    case "string":
      return `string ${JSON.stringify(t.value)}`;
    case "number":
      return `number ${t.value}`;
    case "punct":
      return `"${t.text}"`;
    case "end":
      return "end of selector";
  }
}

class Parser {
  private i = 0;
  constructor(private readonly tokens: Token[]) {}

  peek(): Token {
    return this.tokens[this.i] as Token;
  }
  next(): Token {
    const t = this.peek();
    if (t.kind !== "end") this.i++;
    return t;
  }
  isPunct(text: string): boolean {
    const t = this.peek();
    return t.kind === "punct" && t.text === text;
  }
  expectPunct(text: string, after: string): void {
    const t = this.next();
    if (t.kind !== "punct" || t.text !== text) throw invalid(`expected "${text}" ${after} at position ${t.pos}, found ${describe(t)}`);
  }

  /** `[new] UiSelector()` then `.method(arg)`…; at the top level the constructor may be left out. */
  selector(depth: number, topLevel: boolean): UiSelectorQuery {
    if (depth > MAX_NESTING) throw invalid(`selectors nested more than ${MAX_NESTING} deep`);
    let t = this.peek();
    let constructed = false;
    let afterNew = false;
    if (t.kind === "ident" && t.text === "new") {
      this.next();
      t = this.peek();
      if (t.kind !== "ident") throw invalid(`expected a class after "new" at position ${t.pos}, found ${describe(t)}`);
      afterNew = true;
    }
    if (t.kind === "ident" && (t.text === "UiScrollable" || t.text === "UiObject" || t.text === "UiCollection")) {
      throw invalid(`${t.text} is not supported (farm reads the screen as it is and does not scroll to find); use a UiSelector`);
    }
    if (afterNew && t.kind === "ident" && t.text !== "UiSelector") throw invalid(`new ${t.text}: farm reads only new UiSelector() (position ${t.pos})`);
    if (t.kind === "ident" && t.text === "UiSelector") {
      this.next();
      this.expectPunct("(", "after UiSelector");
      this.expectPunct(")", "(UiSelector() takes no arguments)");
      constructed = true;
    } else if (!topLevel) {
      throw invalid(`expected new UiSelector() at position ${t.pos}, found ${describe(t)}`);
    }
    const criteria: Criterion[] = [];
    let instance: number | undefined;
    let child: UiSelectorQuery | undefined;
    let first = true;
    for (;;) {
      const dot = this.isPunct(".");
      // Without a constructor, the first call may stand bare: text("OK").
      if (!dot && !(first && !constructed && this.peek().kind === "ident")) break;
      if (dot) this.next();
      first = false;
      const name = this.next();
      if (name.kind !== "ident") throw invalid(`expected a UiSelector method at position ${name.pos}, found ${describe(name)}`);
      const method = Object.hasOwn(METHODS, name.text) ? METHODS[name.text] : undefined;
      if (!method) {
        const why = Object.hasOwn(UNANSWERABLE, name.text) ? UNANSWERABLE[name.text] : undefined;
        throw invalid(why ? `${name.text}(): ${why}` : `unknown UiSelector method ${name.text}() at position ${name.pos}`);
      }
      this.expectPunct("(", `after ${name.text}`);
      const arg = this.arg(name.text, depth);
      this.expectPunct(")", `to close ${name.text}( (one argument)`);
      const r = method(arg, name.text);
      if (r.criterion) criteria.push(r.criterion);
      if (r.instance !== undefined) {
        if (instance !== undefined) throw invalid("instance() is given twice");
        instance = r.instance;
      }
      if (r.child) {
        if (child) throw invalid("childSelector() is given twice; nest the second inside the first");
        child = r.child;
      }
    }
    if (!constructed && criteria.length === 0 && instance === undefined && !child) {
      const t2 = this.peek();
      throw invalid(`expected new UiSelector() at position ${t2.pos}, found ${describe(t2)}`);
    }
    return { criteria, ...(instance === undefined ? {} : { instance }), ...(child ? { child } : {}) };
  }

  private arg(method: string, depth: number): Arg {
    const t = this.peek();
    if (t.kind === "string") {
      this.next();
      return { kind: "string", value: t.value };
    }
    if (t.kind === "number") {
      this.next();
      return { kind: "number", value: t.value };
    }
    if (t.kind === "ident" && (t.text === "true" || t.text === "false")) {
      this.next();
      return { kind: "boolean", value: t.text === "true" };
    }
    if (t.kind === "ident" && (t.text === "new" || t.text === "UiSelector" || t.text === "UiScrollable")) {
      return { kind: "selector", value: this.selector(depth + 1, false) };
    }
    throw invalid(`${method}() needs one argument, found ${describe(t)} at position ${t.pos}`);
  }
}

/** An element and where it sits (child indexes from the root). */
export interface Placed {
  readonly path: readonly number[];
  readonly element: UiElement;
}

/**
 * The elements inside `scope` (its descendants; the scope itself too when
 * `includeScope`) that the statements select, united, in document order.
 */
export function selectByUiSelector(statements: readonly UiSelectorQuery[], scope: Placed, includeScope: boolean): Placed[] {
  const found = statements.flatMap((q) => run(q, scope, includeScope));
  return uniqueInDocumentOrder(found);
}

function run(query: UiSelectorQuery, scope: Placed, includeScope: boolean): Placed[] {
  let matches = [...placedWithin(scope, includeScope)].filter((c) => query.criteria.every((k) => k.test(c.element, c.path.at(-1) ?? 0)));
  if (query.instance !== undefined) {
    const one = matches[query.instance];
    matches = one ? [one] : [];
  }
  const child = query.child;
  if (child) matches = uniqueInDocumentOrder(matches.flatMap((m) => run(child, m, false)));
  return matches;
}

/** Depth-first, parents before children: document order. */
export function* placedWithin(scope: Placed, includeScope: boolean): Generator<Placed> {
  if (includeScope) yield scope;
  const stack: Placed[] = [];
  const push = (p: Placed) => {
    for (let i = p.element.children.length - 1; i >= 0; i--) stack.push({ path: [...p.path, i], element: p.element.children[i] as UiElement });
  };
  push(scope);
  while (stack.length > 0) {
    const p = stack.pop() as Placed;
    yield p;
    push(p);
  }
}

export function uniqueInDocumentOrder<T extends { readonly path: readonly number[] }>(list: readonly T[]): T[] {
  const seen = new Set<string>();
  const out: T[] = [];
  for (const p of list) {
    const key = p.path.join(",");
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(p);
  }
  return out.sort((a, b) => comparePaths(a.path, b.path));
}

/** Document order: a parent before its children, siblings by index. */
export function comparePaths(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const d = (a[i] as number) - (b[i] as number);
    if (d !== 0) return d;
  }
  return a.length - b.length;
}
