// Syntax tree of the shell subset devsim understands (a small slice of mksh).

/** Piece of a word: literal text, or a parameter ($?, $NAME) expanded at run time. */
export type WordPart =
  | { type: "literal"; value: string; quoted: boolean }
  | { type: "param"; name: string; quoted: boolean }
  /** `$(script)` or `` `script` ``: replaced by the script's output, trailing newlines removed. */
  | { type: "command"; script: string; quoted: boolean };

export interface Word {
  parts: WordPart[];
}

export type RedirectOp = ">" | ">>" | "<" | ">&" | "<&";

export interface Redirect {
  /** File descriptor being redirected (default 1 for output, 0 for input). */
  fd: number;
  op: RedirectOp;
  target: Word;
}

export interface Assignment {
  name: string;
  value: Word;
}

export interface SimpleCommand {
  type: "simple";
  assignments: Assignment[];
  words: Word[];
  redirects: Redirect[];
}

/** `while LIST; do LIST; done` (or `until`). */
export interface LoopCommand {
  type: "loop";
  until: boolean;
  condition: CommandList;
  body: CommandList;
  redirects: Redirect[];
}

/** `if LIST; then LIST; [elif LIST; then LIST;]… [else LIST;] fi` */
export interface IfCommand {
  type: "if";
  branches: Array<{ condition: CommandList; body: CommandList }>;
  elseBody: CommandList | undefined;
  redirects: Redirect[];
}

/** `( LIST )`: runs in a copy of the shell; `exit`, `cd` and variables stay inside. */
export interface SubshellCommand {
  type: "subshell";
  body: CommandList;
  redirects: Redirect[];
}

export type CommandNode = SimpleCommand | LoopCommand | IfCommand | SubshellCommand;

export interface Pipeline {
  negate: boolean;
  commands: CommandNode[];
}

/** Pipelines joined by && / ||, evaluated left to right. */
export interface AndOrList {
  first: Pipeline;
  rest: Array<{ op: "&&" | "||"; pipeline: Pipeline }>;
  /** Ended by `&`: runs as a background job, the shell goes on at once. */
  background?: boolean;
}

/** AndOr lists separated by `;` or newlines. */
export interface CommandList {
  items: AndOrList[];
}
