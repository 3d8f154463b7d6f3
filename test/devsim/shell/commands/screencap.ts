import { FsError } from "../../fs/fs-error.js";
import { damagePng } from "../../screen/png-faults.js";
import type { ShellCommand } from "../command.js";
import { pathOf } from "./file-args.js";

/**
 * `screencap [-p] [-d ID] [FILE]`: PNG with -p (or a .png FILE), otherwise
 * raw RGBA after a 16-byte header (width, height, format 1 = RGBA_8888,
 * dataspace), as Android 11+ writes it. PNG faults apply here.
 */
export const screencapCommand: ShellCommand = async (ctx) => {
  const args = [...ctx.args];
  const d = args.indexOf("-d");
  if (d >= 0) args.splice(d, 2);
  const png = args.includes("-p");
  const operands = args.filter((arg) => !arg.startsWith("-"));
  const file = operands[0];
  const asPng = png || (file?.endsWith(".png") ?? false);
  // A phone reads the frame, then encodes it: both scale with its pixels (latency profiles).
  const { latency, display } = ctx.device;
  if (!latency.instant) {
    const { width, height } = display.logicalSize;
    const mpx = (width * height) / 1e6;
    await latency.wait("screencapCaptureMsPerMpx", mpx);
    if (asPng) await latency.wait("screencapPngMsPerMpx", mpx);
  }
  let bytes: Buffer;
  if (asPng) {
    bytes = await ctx.device.renderer.png();
    const fault = ctx.device.faults.current.png;
    if (fault) bytes = damagePng(bytes, fault);
  } else {
    const frame = await ctx.device.renderer.frame();
    const header = Buffer.alloc(16);
    header.writeUInt32LE(frame.width, 0);
    header.writeUInt32LE(frame.height, 4);
    header.writeUInt32LE(1, 8);
    header.writeUInt32LE(0x08810000 >>> 0, 12);
    bytes = Buffer.concat([header, frame.rgba]);
  }
  if (file === undefined) {
    await ctx.stdout.write(bytes);
    return 0;
  }
  try {
    ctx.device.fs.writeFile(pathOf(ctx, file), bytes, ctx.caller, { mode: 0o660 });
    return 0;
  } catch (error) {
    if (!(error instanceof FsError)) throw error;
    await ctx.stderr.write(`Error opening file: ${file} (${error.message})\n`);
    return 1;
  }
};
