import { Errors, Exit } from "@farm/shared/error-codes";
import { clientOptions } from "../options/common-options.js";
import { allCommands, describeTree, optionInfo as describeOption, type CommandInfo, type OptionInfo } from "../tree/describe.js";

/** The connection flags every client command takes, listed once. */
const connectionFlags = new Set(Object.values(clientOptions).map((o) => `${o.flags}\u0000${o.description}`));
const isConnection = (o: OptionInfo) => connectionFlags.has(`${o.flags}\u0000${o.description}`);

/**
 * docs/cli.md, generated from the command tree (write-cli-doc.ts writes
 * it; cli-doc.test.ts fails when the file and the tree disagree).
 */

const argTerm = (a: { name: string; required?: boolean | undefined; variadic?: boolean | undefined }) => {
  const inner = `${a.name.toUpperCase()}${a.variadic ? "..." : ""}`;
  return a.required ? inner : `[${inner}]`;
};

function usage(c: CommandInfo): string {
  if (c.commands) return `${c.path} <command> [flags]`;
  return [c.path, "[flags]", ...(c.args ?? []).map(argTerm)].join(" ");
}

function optionRow(o: OptionInfo): string {
  const cell = (s: string | undefined) => (s ? s.replace(/\|/g, "\\|") : "");
  return `| \`${o.flags}\` | ${cell(o.description)}${o.choices ? ` (${o.choices.join(", ")})` : ""}${o.kind === "list" ? " (repeatable)" : ""}${o.required ? " (required)" : ""} | ${cell(o.default)} | ${o.env ? `\`${o.env}\`` : ""} | ${
    o.config ? `\`${o.config}\`` : ""
  } |`;
}

function section(c: CommandInfo): string[] {
  const depth = Math.min(4, c.path.split(" ").length);
  const lines = [`${"#".repeat(depth)} \`${c.path}\``, "", c.summary + (c.shortcutOf ? `; the same as \`${c.shortcutOf}\`` : ""), ""];
  if (c.description) lines.push(c.description, "");
  lines.push("```", usage(c), "```", "");
  if (c.defaultCommand) lines.push(`Without a subcommand, runs \`${c.path} ${c.defaultCommand}\` with the flags given.`, "");
  if (c.commands) {
    lines.push("| command | what it does |", "| --- | --- |", ...c.commands.filter((s) => !s.hidden).map((s) => `| \`${s.name}\` | ${s.summary.replace(/\|/g, "\\|")} |`), "");
  }
  if (c.args?.length) lines.push(...c.args.map((a) => `- \`${argTerm(a)}\`: ${a.description}`), "");
  const shown = (c.options ?? []).filter((o) => !o.hidden && !isConnection(o));
  if (shown.length && !c.shortcutOf) {
    lines.push("| flag | meaning | default | environment | config file |", "| --- | --- | --- | --- | --- |", ...shown.map(optionRow), "");
  }
  if (!c.shortcutOf && (c.options ?? []).some(isConnection)) lines.push("Also takes the [connection flags](#connection-flags).", "");
  if (c.mutation) lines.push("Changes the device: a refusal before anything was sent carries `dispatched: false`.", "");
  if (c.examples?.length) lines.push("Examples:", "", "```sh", ...c.examples, "```", "");
  return lines;
}

const examples = `## Output

Every command prints one JSON object on stdout when stdout is not a
terminal (or with \`-o json\`), text for people with \`-o pretty\` (the
default on a terminal), and \`-o wide\`: pretty with more columns where a
list has them (devices, leases, agents). Progress (lease waits, transfers,
video finalizing) goes to stderr, only on a terminal and never with json.

A success:

\`\`\`sh
$ farm devices -o json
{"ok":true,"devices":[{"serial":"emulator-5554","state":"device","agentName":"lab-1", …}]}
$ farm lease acquire --device emulator-5554 -o json
{"ok":true,"lease":{"leaseId":"…","token":"farml_…","serial":"emulator-5554","expiresAt":"…", …}}
$ farm shell --device emulator-5554 -o json -- echo hi
{"ok":true,"actionId":"…","exitCode":0,"stdout":"hi\\n","stderr":"","dispatched":true,"ambiguous":false}
\`\`\`

A failure: the exit code of its error code (see [Exit codes](#exit-codes);
a device command's own exit code for \`farm shell\`), and the envelope with a stable \`code\` from the error table and the flag or
argument at fault in \`field\`. A refusal before anything was sent (a bad
flag or argument, a reused \`--request-id\` with other content, an app
endpoint not found) always carries \`"dispatched":false,"ambiguous":false\`,
whatever the command:

\`\`\`sh
$ farm devices --bogus -o json
{"ok":false,"code":"INVALID_ARGUMENT","message":"unknown flag --bogus for farm devices; see \`farm devices --help\`","field":"bogus","dispatched":false,"ambiguous":false}
$ farm input tap x 10 -o json
{"ok":false,"code":"INVALID_ARGUMENT","message":"x must be a non-negative integer","field":"x","dispatched":false,"ambiguous":false}
\`\`\`

With \`-o pretty\`, the same failure is one line on stderr:

\`\`\`
error: unknown flag --bogus for farm devices; see \`farm devices --help\` [INVALID_ARGUMENT, field bogus]
\`\`\`

\`--verbose\` adds each call's \`x-request-id\` and elapsed time on stderr.

## Settings

A setting comes from, highest first: its flag, its environment variable,
the config file (\`FARM_CONFIG\`, else \`~/.config/farm/config.json\`; see
\`farm config view\` and \`farm config set\`), then its default. Client
commands without a coordinator anywhere use the local \`farm standalone\`
(its address and admin token under \`FARM_HOME\`). \`farm config view\` lists
each setting in effect with where it came from (the flag, the variable by
name, the file's path, the standalone's file, or default; \`sources\` in
JSON); a token is shown only as set, never its value.
`;

/** What each exit code means, in the table's order; the error codes under each come from the error table (error-codes.ts). */
const exitMeaning: Record<number, string> = {
  [Exit.TEST_FAILED]: "the test failed: what the app under test did (an element missing, a visual mismatch, a wait that timed out, an app that refused to install)",
  [Exit.USAGE]: "usage (EX_USAGE): a bad flag, argument or selector",
  [Exit.DATA]: "data (EX_DATAERR): data given or met is not acceptable",
  [Exit.NO_INPUT]: "not found (EX_NOINPUT): the device, lease, session or evidence named does not exist",
  [Exit.UNAVAILABLE]: "unavailable (EX_UNAVAILABLE): the farm cannot serve this now",
  [Exit.SOFTWARE]: "internal (EX_SOFTWARE): a fault in farm, or an error code this CLI does not know",
  [Exit.CANT_CREATE]: "cannot create (EX_CANTCREAT): a file farm would write already exists",
  [Exit.TEMPORARY]: "temporary (EX_TEMPFAIL): try again later",
  [Exit.PROTOCOL]: "protocol (EX_PROTOCOL): the other side speaks another version",
  [Exit.NO_PERMISSION]: "permission (EX_NOPERM): no token, a token without the right, no lease or another's",
  [Exit.CONFIG]: "configuration (EX_CONFIG): TLS trust or a database schema",
};

function exitCodes(): string[] {
  const codes = [...new Set<number>(Object.values(Exit))].sort((a, b) => a - b);
  const fromTable = codes.map((n): [number, string] => {
    const names = Object.values(Errors).filter((e) => e.exit === n).map((e) => `\`${e.code}\``);
    return [n, `| ${n} | ${exitMeaning[n] ?? ""} | ${names.join(", ")} |`];
  });
  const others: [number, string][] = [
    [0, "| 0 | success | |"],
    [74, "| 74 | stdout failed other than by its reader closing (EX_IOERR) | |"],
    [
      130,
      "| 130, 143 | stopped by SIGINT or SIGTERM (128 + the signal): the call in flight is cancelled (`CALL_CANCELLED`), up to the agent: a change still waiting for a busy phone is dropped there and never runs (`farm device ownership status` counts the waiting ones); one already sent to the phone may still finish (`ambiguous:true`; its outcome is in `farm activity` and the ownership journal); a lease wait so stopped leaves nothing queued or held | |",
    ],
    [141, "| 141 | stdout's reader went away (`farm … \\| head`): the output stops quietly, as a writer killed by SIGPIPE | |"],
  ];
  const rows = [...fromTable, ...others].sort(([a], [b]) => a - b).map(([, row]) => row);
  return [
    "## Exit codes",
    "",
    "A script can tell farm's own failures from a failing test by the exit code, in the spirit of",
    "BSD sysexits: every error code in the envelope's `code` has one exit code. 1 is kept for what the",
    "test or the app under test did, so a farm failure never looks like a failing test.",
    "",
    "| exit | meaning | error codes |",
    "| --- | --- | --- |",
    ...rows,
    "",
    "`farm lease run` exits with its command's own code once the command ran (whatever it is, 69 included;",
    "SIGINT and SIGTERM go to the command, and the lease is released after it exits);",
    "the codes above are for when farm failed before or instead of running it. `farm shell` exits with the",
    "device command's code. `farm evidence capture` that is partial or failed exits 69 (1 when every error",
    "in its manifest is the app's own, an app bridge not ready); `farm evidence verify` of a bundle that",
    "does not match exits 65; a recording that failed, its code's exit; `farm device ownership status` and",
    "`reconcile` with unresolved actions exit 75 (`DEVICE_OWNERSHIP_UNRESOLVED`).",
    "",
    "Compatibility: before this table every failure exited 1. A script that tested `$? -eq 1` for a farm",
    "refusal should test `$? -ne 0`, or the code it means (69 no device available, 75 a lease wait timed",
    "out, 77 no token or lease).",
    "",
  ];
}

function environment(root: CommandInfo): string[] {
  const vars = new Map<string, Set<string>>();
  for (const c of allCommands(root)) for (const o of c.options ?? []) if (o.env) vars.set(o.env, (vars.get(o.env) ?? new Set()).add(`--${o.name}`));
  vars.set("FARM_TOKEN", new Set(["(the token itself; --token-file names a file)"]));
  vars.set("FARM_AGENT_TOKEN", new Set(["(farm agent run: the agent token itself)"]));
  vars.set("FARM_CONFIG", new Set(["(the client config file)"]));
  vars.set("FARM_HOME", new Set(["(farm standalone's data, found by clients)"]));
  return ["| variable | sets |", "| --- | --- |", ...[...vars].sort(([a], [b]) => (a < b ? -1 : 1)).map(([v, f]) => `| \`${v}\` | ${[...f].join(", ")} |`), ""];
}

export function cliDoc(): string {
  const root = describeTree();
  const visible = (c: CommandInfo): CommandInfo[] => (c.hidden ? [] : [c, ...(c.commands ?? []).flatMap(visible)]);
  const commands = (root.commands ?? []).flatMap(visible);
  return [
    "# farm CLI reference",
    "",
    "<!-- Generated from the command tree by `node cli/dist/docs/write-cli-doc.js`; cli/src/docs/cli-doc.test.ts fails when it drifts. Do not edit by hand. -->",
    "",
    `\`farm <command> [flags]\`: ${root.summary}. \`farm COMMAND --help\` shows the same for one command.`,
    "",
    "| flag | meaning | default | environment | config file |",
    "| --- | --- | --- | --- | --- |",
    ...(root.options ?? []).map(optionRow),
    "",
    examples,
    ...exitCodes(),
    "## Connection flags",
    "",
    "Every command that talks to the coordinator takes these.",
    "",
    "| flag | meaning | default | environment | config file |",
    "| --- | --- | --- | --- | --- |",
    ...Object.values(clientOptions).map((o) => optionRow(describeOption(o))),
    "",
    "## Environment",
    "",
    ...environment(root),
    "## Commands",
    "",
    ...commands.flatMap(section),
  ]
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trimEnd()
    .concat("\n");
}
