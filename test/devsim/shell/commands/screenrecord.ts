import { FsError } from "../../fs/fs-error.js";
import { ScreenRecorder } from "../../screen/screen-recorder.js";
import type { ShellCommand } from "../command.js";
import { pathOf } from "./file-args.js";

const MAX_TIME_LIMIT_S = 180;
const DEFAULT_BIT_RATE = 20_000_000;

/** `4M`, `500k`, `4000000` → bits per second. */
function parseBitRate(text: string): number {
  const match = /^(\d+(?:\.\d+)?)([kKmM]?)$/.exec(text);
  if (!match) return NaN;
  const unit = match[2]?.toLowerCase() === "m" ? 1_000_000 : match[2]?.toLowerCase() === "k" ? 1_000 : 1;
  return Math.round(Number(match[1]) * unit);
}

/**
 * Overwrites the middle half of the `mdat` box (the encoded frames) with a
 * fixed garbage pattern: the container still parses, the frames do not.
 */
function corruptMedia(bytes: Buffer): Buffer {
  const out = Buffer.from(bytes);
  const at = out.indexOf("mdat");
  if (at < 4) return out;
  const size = out.readUInt32BE(at - 4);
  const start = at + 4 + Math.floor(size / 4);
  const end = Math.min(out.length, at - 4 + size - Math.floor(size / 4));
  for (let i = start; i < end; i++) out[i] = (i * 131) & 0xff;
  return out;
}

/**
 * `screenrecord [--size WxH] [--bit-rate B] [--time-limit N] [--output-format mp4|h264] [--verbose] FILE`:
 * a foreground process listed by ps; SIGINT/SIGHUP or the time limit
 * (default and maximum 180 s) finalize the MP4, SIGKILL leaves it truncated.
 * With `--output-format=h264` and FILE `-`, raw H.264 streams to stdout as
 * frames are encoded (what live screens read through `adb exec-out`).
 */
export const screenrecordCommand: ShellCommand = async (ctx) => {
  const device = ctx.device;
  let size: { width: number; height: number } | undefined;
  let bitRate = DEFAULT_BIT_RATE;
  let timeLimit = MAX_TIME_LIMIT_S;
  let verbose = false;
  let format: "mp4" | "h264" = "mp4";
  const operands: string[] = [];
  const args = [...ctx.args];
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!;
    const [flag, inline] = arg.includes("=") ? (arg.split("=", 2) as [string, string]) : [arg, undefined];
    const value = () => inline ?? args[++index] ?? "";
    if (flag === "--size") {
      const text = value();
      const match = /^(\d+)x(\d+)$/.exec(text);
      if (!match) {
        await ctx.stderr.write(`Invalid size '${text}', must be width x height\n`);
        return 2;
      }
      size = { width: Number(match[1]), height: Number(match[2]) };
      if (size.width === 0 || size.height === 0) {
        await ctx.stderr.write(`Invalid size ${size.width}x${size.height}, width and height may not be zero\n`);
        return 2;
      }
    } else if (flag === "--bit-rate") {
      bitRate = parseBitRate(value());
      if (!(bitRate >= 100_000 && bitRate <= 200_000_000)) {
        await ctx.stderr.write(`Bit rate ${bitRate}bps outside acceptable range [100000,200000000]\n`);
        return 2;
      }
    } else if (flag === "--time-limit") {
      timeLimit = Number.parseInt(value(), 10) || 0;
      if (timeLimit <= 0 || timeLimit > MAX_TIME_LIMIT_S) {
        await ctx.stderr.write(`Time limit ${timeLimit}s outside acceptable range [1,${MAX_TIME_LIMIT_S}]\n`);
        return 2;
      }
    } else if (flag === "--output-format") {
      const text = value();
      if (text !== "mp4" && text !== "h264") {
        // frames and raw-frames exist on real phones; nothing here reads them.
        await ctx.stderr.write(`Unknown format '${text}'\n`);
        return 2;
      }
      format = text;
    } else if (flag === "--verbose" || flag === "-v") {
      verbose = true;
    } else if (flag === "--help") {
      await ctx.stdout.write(
        "Usage: screenrecord [options] <filename>\n\nAndroid screenrecord v1.3.  Records the device's display to a .mp4 file.\n\nOptions:\n--size WIDTHxHEIGHT\n--bit-rate RATE\n--time-limit TIME\n--verbose\n--help\n",
      );
      return 0;
    } else if (flag === "--bugreport" || flag === "--rotate") {
      // Accepted, no visible effect here.
    } else if (flag.startsWith("-") && flag !== "-") {
      await ctx.stderr.write(`Unknown option '${flag}'\n`);
      return 2;
    } else {
      operands.push(arg);
    }
  }
  if (operands.length !== 1) {
    await ctx.stderr.write("Must specify output file (see --help).\n");
    return 2;
  }
  const file = operands[0]!;
  const toStdout = format === "h264" && file === "-";
  const path = toStdout ? "" : pathOf(ctx, file);
  const display = device.display.logicalSize;
  const recordSize = size ?? display;
  if (recordSize.width % 2 === 1 || recordSize.height % 2 === 1 || device.faults.current.screenrecordFails) {
    await ctx.stderr.write(`ERROR: unable to configure video/avc codec at ${recordSize.width}x${recordSize.height} (err=-38)\n`);
    return 1;
  }
  if (!toStdout) {
    try {
      device.fs.openForWrite(path, ctx.caller, { mode: 0o660 });
    } catch (error) {
      if (!(error instanceof FsError)) throw error;
      await ctx.stderr.write(`Unable to open '${file}': ${error.message}\n`);
      return 1;
    }
  }
  // Raw H.264 to a file is kept whole and written at the end, as the MP4 is.
  const rawParts: Buffer[] = [];
  const h264 = format === "mp4" ? undefined : toStdout ? (chunk: Buffer) => ctx.stdout.write(chunk) : async (chunk: Buffer) => void rawParts.push(chunk);
  if (verbose && !toStdout) {
    await ctx.stdout.write(`Main display is ${display.width}x${display.height} @60.00fps (orientation=${device.display.rotation})\nConfigured codec video/avc at ${recordSize.width}x${recordSize.height}, bit rate ${bitRate}\n`);
  }

  // The encoder's start-up, under a latency profile.
  await device.latency.wait("screenrecordStartMs");
  const recorder = new ScreenRecorder(device.screen, device.renderer, {
    size: recordSize,
    bitRate,
    timeLimitMs: (device.faults.current.screenrecordOverrun ? MAX_TIME_LIMIT_S : timeLimit) * 1000,
    ...(h264 ? { h264 } : {}),
    onFrame: () => device.recordedFrames.add(),
  });
  let killedBy: number | undefined;
  const process = device.processes.spawn({
    ppid: 1,
    uid: ctx.caller.uid,
    name: "screenrecord",
    args: ["screenrecord", ...ctx.args].join(" "),
    onSignal: (signal) => {
      // screenrecord catches SIGINT and SIGHUP and finishes the file; other signals kill it.
      if (signal === 2 || signal === 1) void recorder.stop();
      else {
        killedBy = signal;
        void recorder.kill();
      }
    },
  });
  // The host hanging up delivers SIGHUP to the session.
  const onAbort = () => void recorder.stop();
  ctx.signal.addEventListener("abort", onAbort, { once: true });
  const started = Date.now();
  try {
    await recorder.start();
    const result = await recorder.done;
    if (!toStdout) {
      const recorded = h264 ? Buffer.concat(rawParts) : result.bytes;
      const bytes = device.faults.current.screenrecordCorrupt ? corruptMedia(recorded) : recorded;
      try {
        device.fs.writeFile(path, bytes, ctx.caller, { mode: 0o660 });
      } catch (error) {
        if (!(error instanceof FsError)) throw error;
        await ctx.stderr.write(`ERROR: write failed: ${error.message}\n`);
        return 1;
      }
    }
    if (killedBy !== undefined) return 128 + killedBy;
    if (verbose && !toStdout) await ctx.stdout.write(`Encoder stopping; recorded ${result.frames} frames in ${Math.round((Date.now() - started) / 1000)} seconds\nStopping encoder and muxer\n`);
    return 0;
  } catch (error) {
    await ctx.stderr.write(`ERROR: ${(error as Error).message}\n`);
    return 1;
  } finally {
    ctx.signal.removeEventListener("abort", onAbort);
    device.processes.exit(process.pid, process);
  }
};
