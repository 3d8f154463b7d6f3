import { PRIORITY_LETTERS, type LogEntry } from "../../device/log-buffer.js";
import type { ShellCommand } from "../command.js";

/** `TAG:P` filter specs; `*:P` sets the default; S silences. */
function makeFilter(specs: string[]): (entry: LogEntry) => boolean {
  const letters = "VDIWEFS";
  const level = (letter: string) => letters.indexOf(letter.toUpperCase()) + 2;
  let fallback = 2;
  const byTag = new Map<string, number>();
  for (const spec of specs) {
    const [tag, letter = "V"] = spec.split(":") as [string, string?];
    if (tag === "*") fallback = level(letter);
    else byTag.set(tag, level(letter));
  }
  return (entry) => entry.priority >= (byTag.get(entry.tag) ?? fallback);
}

function pad(n: number, width = 2): string {
  return String(n).padStart(width, "0");
}

/** threadtime format: `MM-DD HH:MM:SS.mmm  PID  TID P TAG: message`. */
function formatText(entry: LogEntry, format: string): string {
  const d = new Date(entry.time);
  const letter = PRIORITY_LETTERS[entry.priority] ?? "I";
  if (format === "brief") return `${letter}/${entry.tag}(${String(entry.pid).padStart(5)}): ${entry.message}\n`;
  const stamp = `${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}.${pad(d.getUTCMilliseconds(), 3)}`;
  return `${stamp} ${String(entry.pid).padStart(5)} ${String(entry.tid).padStart(5)} ${letter} ${entry.tag}: ${entry.message}\n`;
}

/** logger_entry v4 (what `logcat -B` writes): len, hdr_size 28, pid, tid, sec, nsec, lid, uid; payload prio, tag\0, msg\0. */
export function formatBinary(entry: LogEntry): Buffer {
  const payload = Buffer.concat([Buffer.from([entry.priority]), Buffer.from(`${entry.tag}\0`), Buffer.from(`${entry.message}\0`)]);
  const header = Buffer.alloc(28);
  header.writeUInt16LE(payload.length, 0);
  header.writeUInt16LE(28, 2);
  header.writeInt32LE(entry.pid, 4);
  header.writeInt32LE(entry.tid, 8);
  header.writeInt32LE(Math.floor(entry.time / 1000), 12);
  header.writeInt32LE((entry.time % 1000) * 1_000_000, 16);
  header.writeUInt32LE(0, 20);
  header.writeUInt32LE(entry.uid, 24);
  return Buffer.concat([header, payload]);
}

/** `logcat [-d] [-c] [-B] [-v FORMAT] [-t N] [FILTERSPEC…]`: without -d it follows until the session ends. */
export const logcatCommand: ShellCommand = async (ctx) => {
  const log = ctx.device.log;
  let dump = false;
  let binary = false;
  let format = "threadtime";
  let tail: number | undefined;
  const specs: string[] = [];
  for (let index = 0; index < ctx.args.length; index++) {
    const arg = ctx.args[index]!;
    if (arg === "-c") {
      log.clear();
      return 0;
    }
    if (arg === "-d") dump = true;
    else if (arg === "-B" || arg === "--binary") binary = true;
    else if (arg === "-v") format = ctx.args[++index] ?? format;
    else if (arg === "-t" || arg === "-T") {
      tail = Number(ctx.args[++index]);
      dump = arg === "-t" || dump;
    } else if (arg === "-b") index++;
    else if (arg.startsWith("-")) {
      await ctx.stderr.write(`logcat: invalid option -- '${arg.slice(1)}'\n`);
      return 1;
    } else specs.push(arg);
  }
  const filter = makeFilter(specs);
  const emit = (entry: LogEntry) => ctx.stdout.write(binary ? formatBinary(entry) : formatText(entry, format));
  let entries = log.list().filter(filter);
  if (tail !== undefined) entries = entries.slice(-tail);
  for (const entry of entries) await emit(entry);
  if (dump) return 0;
  // Follow new entries until the host hangs up.
  let chain = Promise.resolve();
  const unsubscribe = log.subscribe((entry) => {
    if (filter(entry)) chain = chain.then(() => emit(entry));
  });
  try {
    await new Promise<void>((_, reject) => ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason), { once: true }));
  } finally {
    unsubscribe();
  }
  return 0;
};
