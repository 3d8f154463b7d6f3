import { userName } from "../../fs/caller.js";
import { S_IFCHR, S_IFDIR, S_IFLNK, S_IFMT, type StatInfo } from "../../fs/file-system.js";
import type { ShellCommand } from "../command.js";
import { pathOf, reportFsError, splitOptions } from "./file-args.js";

/** toybox ls: `-l` long format, `-a` dot files, `-d` directories themselves, `-1`; sorted by name. */
export const lsCommand: ShellCommand = async (ctx) => {
  const { flags, operands, bad } = splitOptions(ctx.args, "laAd1nR");
  if (bad !== undefined) {
    await ctx.stderr.write(`ls: Unknown option '${bad}'\n`);
    return 1;
  }
  const long = flags.has("l") || flags.has("n");
  const targets = operands.length === 0 ? ["."] : operands;
  const fs = ctx.device.fs;
  let status = 0;
  const files: Array<{ name: string; stat: StatInfo; target: string | undefined }> = [];
  const dirs: string[] = [];
  for (const operand of targets) {
    const path = pathOf(ctx, operand);
    try {
      // Like toybox: a symlink operand is listed itself with -l/-d, followed otherwise.
      const own = fs.stat(path, ctx.caller, false);
      const followed = (own.mode & S_IFMT) === S_IFLNK && !long && !flags.has("d") ? fs.stat(path, ctx.caller, true) : own;
      if ((followed.mode & S_IFMT) === S_IFDIR && !flags.has("d")) dirs.push(operand);
      else files.push({ name: operand, stat: own, target: linkTarget(ctx, path, own) });
    } catch (error) {
      await reportFsError(ctx, operand, error);
      status = 1;
    }
  }
  const lines: string[] = files.map((file) => format(file.name, file.stat, file.target, long));
  for (const operand of dirs) {
    const path = pathOf(ctx, operand);
    try {
      const entries = fs.readdir(path, ctx.caller).filter((entry) => flags.has("a") || flags.has("A") || !entry.name.startsWith("."));
      if (targets.length > 1) lines.push(`${lines.length > 0 ? "\n" : ""}${operand}:`);
      if (flags.has("a")) {
        entries.unshift({ name: ".", stat: fs.stat(path, ctx.caller) }, { name: "..", stat: fs.stat(`${path}/..`, ctx.caller) });
      }
      if (long) lines.push(`total ${entries.reduce((sum, entry) => sum + Math.ceil(entry.stat.size / 4096) * 4, 0)}`);
      for (const entry of entries) lines.push(format(entry.name, entry.stat, linkTarget(ctx, `${path}/${entry.name}`, entry.stat), long));
    } catch (error) {
      await reportFsError(ctx, operand, error);
      status = 1;
    }
  }
  if (lines.length > 0) await ctx.stdout.write(`${lines.join("\n")}\n`);
  return status;
};

function linkTarget(ctx: Parameters<ShellCommand>[0], path: string, stat: StatInfo): string | undefined {
  if ((stat.mode & S_IFMT) !== S_IFLNK) return undefined;
  const node = ctx.device.fs.lookup(path, ctx.caller, false);
  return node.kind === "symlink" ? node.target : undefined;
}

function format(name: string, stat: StatInfo, target: string | undefined, long: boolean): string {
  if (!long) return name;
  const date = new Date(stat.mtime * 1000).toISOString();
  const when = `${date.slice(0, 10)} ${date.slice(11, 16)}`;
  const size = (stat.mode & S_IFMT) === S_IFCHR ? "1,   3" : String(stat.size);
  return `${modeString(stat.mode)} ${String(stat.nlink).padStart(2)} ${userName(stat.uid)} ${userName(stat.gid)} ${size.padStart(8)} ${when} ${name}${target ? ` -> ${target}` : ""}`;
}

/** `drwxrwx--x`-style permission string, with setuid/setgid/sticky letters. */
export function modeString(mode: number): string {
  const type = { [S_IFDIR]: "d", [S_IFLNK]: "l", [S_IFCHR]: "c" }[mode & S_IFMT] ?? "-";
  let out = type;
  for (let shift = 6; shift >= 0; shift -= 3) {
    const bits = (mode >> shift) & 7;
    const special = shift === 6 ? mode & 0o4000 : shift === 3 ? mode & 0o2000 : mode & 0o1000;
    const exec = bits & 1 ? (special ? (shift === 0 ? "t" : "s") : "x") : special ? (shift === 0 ? "T" : "S") : "-";
    out += `${bits & 4 ? "r" : "-"}${bits & 2 ? "w" : "-"}${exec}`;
  }
  return out;
}
