import type { Socket } from "node:net";
import { createRequire } from "node:module";
import { create } from "@bufbuild/protobuf";
import type { Logger } from "@farm/shared/log";
import { ScreenEventSchema, type ScreenEvent } from "@farm/shared/gen/farm/v1/live_screen_service_pb";
import type { Sharp, SharpOptions } from "sharp";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { execOut } from "../adb/adb-exec.js";
import { openDeviceService } from "../adb/adb-service.js";
import { shellV2 } from "../adb/adb-shell.js";
import { parseRotation, parseWmSize } from "../evidence/device-observations.js";
import { PNG_MAX_BYTES } from "../evidence/png-check.js";
import { AccessUnitSplitter, type AccessUnit } from "./h264-access-units.js";

const sharp = createRequire(import.meta.url)("sharp") as (input?: Buffer, options?: SharpOptions) => Sharp;

/** screenrecord's own limit; the stream restarts when it ends. */
const RECORD_LIMIT_S = 180;
/** A pause this long after bytes means the frame they end is whole (screenrecord writes a frame at once). */
const FRAME_IDLE_MS = 8;
/**
 * A screenrecord that gives no frame within this long is stopped and started
 * again with twice the wait: a busy host or phone can be that slow, and it
 * says nothing of the encoder.
 */
const FIRST_FRAME_MS = 5_000;
/** Stopped for silence this many times in a row, screenrecord is taken as giving no H.264 on this phone. */
const SILENT_STARTS_MAX = 3;
/** Images when there is no encoder: at most this many a second (a screencap takes most of that on a real phone). */
const IMAGE_MAX_FPS = 4;
/** Long side of a fallback image: enough to read and tap, small enough to send a few a second. */
const IMAGE_MAX_SIDE = 1280;
/** How often the rotation is read while streaming: a turned phone restarts the stream in its new shape. */
const ROTATION_POLL_MS = 1_500;

interface Display {
  width: number;
  height: number;
  rotation: number;
}

export interface ScreenSourceOptions {
  adb: AdbServerAddress;
  serial: string;
  /** Sends one event on; waiting on it is how a slow coordinator slows the phone's stream. */
  emit: (event: ScreenEvent) => Promise<void>;
  signal: AbortSignal;
  log: Logger;
  /** screenrecord's --time-limit (seconds); tests shorten it to see the restart. */
  recordLimitS?: number;
}

/** The display in input coordinates: `wm size`, turned by the current rotation. */
export async function displayOf(adb: AdbServerAddress, serial: string, signal: AbortSignal): Promise<Display> {
  const [size, rotation] = await Promise.all([shellV2(adb, serial, "wm size", signal), rotationOf(adb, serial, signal)]);
  const s = parseWmSize(size.stdout.toString("utf8"));
  if (!s) throw new Error("the display size (wm size) could not be read");
  return rotation % 2 === 1 ? { width: s.height, height: s.width, rotation } : { ...s, rotation };
}

async function rotationOf(adb: AdbServerAddress, serial: string, signal: AbortSignal): Promise<number> {
  return parseRotation((await shellV2(adb, serial, "dumpsys input", signal)).stdout.toString("utf8")) ?? 0;
}

/** Calls `onTurn` once the phone's rotation is no longer `rotation`; returns what stops watching. */
function watchRotation(opts: ScreenSourceOptions, rotation: number, onTurn: () => void): () => void {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const poll = async () => {
    const now = await rotationOf(opts.adb, opts.serial, opts.signal).catch(() => rotation);
    if (stopped) return;
    if (now !== rotation) return onTurn();
    timer = setTimeout(() => void poll(), ROTATION_POLL_MS);
  };
  timer = setTimeout(() => void poll(), ROTATION_POLL_MS);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/**
 * Streams a phone's screen until `signal` aborts: H.264 from `screenrecord
 * --output-format=h264 -` (restarted when its time limit ends it), or, on a
 * phone that cannot encode, screencap images as JPEG a few times a second.
 */
export async function runScreen(opts: ScreenSourceOptions): Promise<void> {
  let h264 = true;
  let silentStarts = 0;
  while (!opts.signal.aborted) {
    const display = await displayOf(opts.adb, opts.serial, opts.signal);
    if (h264) {
      const firstFrameMs = FIRST_FRAME_MS * 2 ** silentStarts;
      const { frames, turned, silent } = await streamH264(opts, display, firstFrameMs);
      if (frames > 0 || turned || opts.signal.aborted) {
        silentStarts = 0;
      } else if (silent && ++silentStarts < SILENT_STARTS_MAX) {
        opts.log.info("no frame from screenrecord yet; starting it again with a longer wait", { serial: opts.serial, waitedMs: firstFrameMs });
      } else {
        // It ended by itself without a frame (no encoder), or stayed silent every time.
        h264 = false;
        opts.log.info("no H.264 from screenrecord; the live screen falls back to screencap images", { serial: opts.serial, silent });
      }
    } else {
      await streamImages(opts, display);
    }
  }
}

/**
 * One screenrecord run, until it ends, the phone turns or the stream is
 * stopped: how many frames it gave, whether the phone turned, and whether it
 * was stopped for giving no frame within firstFrameMs.
 */
async function streamH264(opts: ScreenSourceOptions, display: Display, firstFrameMs: number): Promise<{ frames: number; turned: boolean; silent: boolean }> {
  const { socket, leftover } = await openDeviceService(opts.adb, opts.serial, `exec:screenrecord --output-format=h264 --time-limit ${opts.recordLimitS ?? RECORD_LIMIT_S} -`, opts.signal);
  const splitter = new AccessUnitSplitter();
  let frames = 0;
  let turned = false;
  // screenrecord keeps the shape it started with: a turned phone needs a new one.
  const unwatch = watchRotation(opts, display.rotation, () => {
    turned = true;
    socket.destroy();
  });
  let formatSent = false;
  const stop = () => socket.destroy();
  opts.signal.addEventListener("abort", stop, { once: true });
  let silent = false;
  const noFrame = setTimeout(() => {
    if (frames > 0) return;
    silent = true;
    socket.destroy();
  }, firstFrameMs);
  const send = async (units: AccessUnit[]) => {
    for (const unit of units) {
      if (!formatSent) {
        // A decoder can only start at a key frame: whatever came before one is dropped.
        if (!unit.key) continue;
        await opts.emit(create(ScreenEventSchema, { kind: { case: "format", value: { codec: codecOf(unit.data), displayWidth: display.width, displayHeight: display.height } } }));
        formatSent = true;
      }
      frames++;
      await opts.emit(create(ScreenEventSchema, { kind: { case: "frame", value: { data: unit.data, key: unit.key, capturedUnixMs: BigInt(Date.now()) } } }));
    }
  };
  try {
    await pump(socket, leftover, splitter, send);
  } catch (err) {
    if (!opts.signal.aborted) opts.log.warn("the live screen's H.264 stream failed", { serial: opts.serial, error: (err as Error).message });
  } finally {
    unwatch();
    clearTimeout(noFrame);
    opts.signal.removeEventListener("abort", stop);
    socket.destroy();
  }
  return { frames, turned, silent };
}

/** Reads the socket through the splitter; a short pause flushes the frame the bytes so far end. */
function pump(socket: Socket, leftover: Buffer, splitter: AccessUnitSplitter, send: (units: AccessUnit[]) => Promise<void>): Promise<void> {
  return new Promise((resolve, reject) => {
    let chain = Promise.resolve();
    let idle: NodeJS.Timeout | undefined;
    const deliver = (units: AccessUnit[]) => {
      if (units.length === 0) return;
      socket.pause();
      chain = chain.then(() => send(units)).then(() => void socket.resume(), (err: unknown) => {
        socket.destroy();
        reject(err as Error);
      });
    };
    const onData = (chunk: Buffer) => {
      clearTimeout(idle);
      try {
        deliver(splitter.push(chunk));
      } catch (err) {
        socket.destroy();
        return reject(err as Error);
      }
      idle = setTimeout(() => deliver(splitter.flush()), FRAME_IDLE_MS);
    };
    socket.on("data", onData);
    socket.on("error", () => undefined); // "close" follows
    socket.on("close", () => {
      clearTimeout(idle);
      deliver(splitter.flush());
      void chain.then(resolve, reject);
    });
    if (leftover.length > 0) onData(leftover);
  });
}

/** The WebCodecs codec string from the key frame's SPS: avc1.PPCCLL (profile, constraints, level). */
export function codecOf(keyFrame: Buffer): string {
  for (let i = 0; i + 7 < keyFrame.length; i++) {
    if (keyFrame[i] === 0 && keyFrame[i + 1] === 0 && keyFrame[i + 2] === 1 && ((keyFrame[i + 3] ?? 0) & 0x1f) === 7) {
      const hex = (n: number | undefined) => (n ?? 0).toString(16).padStart(2, "0").toUpperCase();
      return `avc1.${hex(keyFrame[i + 4])}${hex(keyFrame[i + 5])}${hex(keyFrame[i + 6])}`;
    }
  }
  return "avc1.42E01E";
}

/** screencap as JPEG, a few times a second, until the stream is stopped or the phone turns. */
async function streamImages(opts: ScreenSourceOptions, display: Display): Promise<void> {
  await opts.emit(create(ScreenEventSchema, { kind: { case: "format", value: { codec: "image/jpeg", displayWidth: display.width, displayHeight: display.height } } }));
  let turned = false;
  const unwatch = watchRotation(opts, display.rotation, () => (turned = true));
  try {
    while (!opts.signal.aborted && !turned) await sendImage(opts);
  } finally {
    unwatch();
  }
}

async function sendImage(opts: ScreenSourceOptions): Promise<void> {
  const started = Date.now();
  const shot = await execOut(opts.adb, opts.serial, "screencap -p", { signal: opts.signal, maxBytes: PNG_MAX_BYTES });
  if (shot.error) throw shot.error;
  const png = shot.bytes;
  if (png.length === 0) throw new Error("screencap gave nothing");
  const jpeg = await sharp(png).resize(IMAGE_MAX_SIDE, IMAGE_MAX_SIDE, { fit: "inside", withoutEnlargement: true }).jpeg({ quality: 70 }).toBuffer();
  await opts.emit(create(ScreenEventSchema, { kind: { case: "frame", value: { data: jpeg, key: true, capturedUnixMs: BigInt(started) } } }));
  const wait = started + 1000 / IMAGE_MAX_FPS - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
}
