/**
 * How one flag is declared: once, with its description, value parser,
 * environment variable, config file key and default. The command tree, the
 * help, docs/cli.md, the completions and the resolver (resolve.ts) all read
 * these declarations.
 */
export interface OptionDecl<T> {
  /** value: takes one value; flag: a boolean switch; list: repeatable, values collected. */
  readonly kind: "value" | "flag" | "list";
  /** Commander's syntax: "--device <serial>", "-o, --output <format>", "--insecure". */
  readonly flags: string;
  readonly description: string;
  /** Environment variable bound to it; an empty value counts as unset. */
  readonly env?: string;
  /** Key in the config file bound to it (the client's config file, or a service's --config file). */
  readonly config?: string;
  /** The value when no flag, environment or config file sets it. */
  readonly default?: T;
  /** How a default that is computed at run time reads in help and docs. */
  readonly defaultText?: string;
  /** Text from a flag, the environment or the config file to the value; throws a CliError naming the flag. */
  readonly parse: (text: string, flag: string) => T;
  /** A config file value that is not text (a number, a boolean), when the key allows one. */
  readonly fromConfig?: (value: unknown, flag: string) => T | undefined;
  /** Refused when nothing sets it: "--NAME is required". */
  readonly required?: boolean;
  /** An old spelling kept working, left out of help, docs and completion. */
  readonly hidden?: boolean;
  /** The accepted values, for help and completion (parse enforces them). */
  readonly choices?: readonly string[];
}

export type OptionSet = Readonly<Record<string, OptionDecl<unknown>>>;

/** The value type of a declaration: undefined unless it has a default, is required, a flag or a list. */
export type ValueOf<D> = D extends OptionDecl<infer T> ? T : never;

/** What an action receives: one typed value per declared option. */
export type OptionValues<O extends OptionSet> = { -readonly [K in keyof O]: ValueOf<O[K]> };

type Binding = { env?: string; config?: string; hidden?: boolean; choices?: readonly string[]; fromConfig?: (value: unknown, flag: string) => unknown };

const identity = (text: string) => text;

/** A single-value flag read as text. */
export function text(flags: string, description: string, extra: Binding & { choices?: readonly string[] } = {}): OptionDecl<string | undefined> {
  return { kind: "value", flags, description, parse: identity, ...(extra as object) } as OptionDecl<string | undefined>;
}

/** A single-value flag that must be given (by flag, environment or config file). */
export function requiredText(flags: string, description: string, extra: Binding = {}): OptionDecl<string> {
  return { kind: "value", flags, description, parse: identity, required: true, ...(extra as object) } as OptionDecl<string>;
}

/** A single-value flag with a default. */
export function textWithDefault(flags: string, description: string, fallback: string, extra: Binding = {}): OptionDecl<string> {
  return { kind: "value", flags, description, parse: identity, default: fallback, ...(extra as object) } as OptionDecl<string>;
}

/** A single-value flag with a parser; a default makes the value always defined. */
export function parsed<T>(flags: string, description: string, parse: (text: string, flag: string) => T, extra: Binding & { choices?: readonly string[] } = {}): OptionDecl<T | undefined> {
  return { kind: "value", flags, description, parse, ...(extra as object) } as OptionDecl<T | undefined>;
}

export function parsedWithDefault<T>(flags: string, description: string, parse: (text: string, flag: string) => T, fallback: T, extra: Binding & { defaultText?: string; choices?: readonly string[] } = {}): OptionDecl<T> {
  return { kind: "value", flags, description, parse, default: fallback, ...(extra as object) } as OptionDecl<T>;
}

/** A boolean switch; the environment and config file set it with 1/true. */
export function flag(flags: string, description: string, extra: Binding = {}): OptionDecl<boolean> {
  return { kind: "flag", flags, description, parse: (t: string) => t === "1" || t === "true", default: false, ...(extra as object) } as OptionDecl<boolean>;
}

/** A repeatable flag: every value, in order. */
export function list(flags: string, description: string, extra: Binding = {}): OptionDecl<string[]> {
  return { kind: "list", flags, description, parse: identity, default: [], ...(extra as object) } as unknown as OptionDecl<string[]>;
}

/** The same declaration, hidden: an old spelling that keeps working. */
export function hidden<T>(decl: OptionDecl<T>): OptionDecl<T> {
  return { ...decl, hidden: true };
}

/** The long flag's name without dashes ("request-id"): what errors name in `field`. */
export function flagName(decl: Pick<OptionDecl<unknown>, "flags">): string {
  const long = /--([\w-]+)/.exec(decl.flags)?.[1];
  if (!long) throw new Error(`option "${decl.flags}" has no long flag`);
  return long;
}
