import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Sharp, SharpOptions } from "sharp";
import type { Size } from "./display.js";
import type { ScreenModel } from "./screen-model.js";
import type { Frame, ScreenRenderer } from "./screen-renderer.js";

const sharp = createRequire(import.meta.url)("sharp") as (input?: Buffer, options?: SharpOptions) => Sharp;

/** At most this many frames per second while the scene changes. */
export const RECORD_MAX_FPS = 10;

export interface RecordingOptions {
  size: Size;
  bitRate: number;
  timeLimitMs: number;
  /**
   * `--output-format=h264`: raw H.264 (Annex B, SPS and PPS before each key
   * frame) written here as it is encoded, instead of an MP4 file. Each
   * frame is flushed as soon as it is encoded, as MediaCodec hands it over.
   */
  h264?: (chunk: Buffer) => Promise<void>;
  /** Called as each frame has been taken by the encoder's pipe. */
  onFrame?: () => void;
}

/** In H.264 output, a key frame at least every this many frames (a new viewer waits at most this long for one). */
export const H264_KEY_INTERVAL_FRAMES = 30;

export interface RecordingResult {
  /** What ffmpeg wrote: a finalized MP4, or a truncated one after a kill. */
  bytes: Buffer;
  frames: number;
  /** True when stopped by SIGKILL-like abort (no moov atom written). */
  killed: boolean;
}

/** ffmpeg executable: $FFMPEG or `ffmpeg` on PATH. */
export function ffmpegBinary(): string {
  return process.env["FFMPEG"] || "ffmpeg";
}

/**
 * Records the screen like screenrecord: frames only when the scene changes
 * (throttled to RECORD_MAX_FPS) stamped with wall-clock time, so a still
 * screen yields a one-frame, near-zero-length timeline. ffmpeg (libx264,
 * ultrafast) encodes rawvideo from a pipe into an MP4 in a host temp dir.
 */
export class ScreenRecorder {
  private ffmpeg: ChildProcess | undefined;
  private dir: string | undefined;
  private frames = 0;
  private stopping = false;
  private killed = false;
  private lastFrameAt = 0;
  private pending: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private writing: Promise<void> = Promise.resolve();
  private exited: Promise<number | null> | undefined;
  private limitTimer: NodeJS.Timeout | undefined;
  private stderr = "";
  /** H.264 output: resolves once everything the encoder wrote has reached the sink. */
  private drained: Promise<void> = Promise.resolve();
  /** Resolves once recording has ended and the file is final. */
  readonly done: Promise<RecordingResult>;
  private finish!: (result: RecordingResult) => void;
  private fail!: (error: Error) => void;

  constructor(
    private readonly screen: ScreenModel,
    private readonly renderer: ScreenRenderer,
    private readonly options: RecordingOptions,
  ) {
    this.done = new Promise((resolve, reject) => {
      this.finish = resolve;
      this.fail = reject;
    });
    void this.done.catch(() => {});
  }

  async start(): Promise<void> {
    const { width, height } = this.options.size;
    this.dir = await mkdtemp(join(tmpdir(), "devsim-rec-"));
    const input = ["-hide_banner", "-loglevel", "error", "-nostdin", "-f", "rawvideo", "-pix_fmt", "rgba", "-s", `${width}x${height}`, "-use_wallclock_as_timestamps", "1", "-i", "pipe:0"];
    const encode = ["-c:v", "libx264", "-preset", "ultrafast", "-b:v", String(this.options.bitRate), "-pix_fmt", "yuv420p", "-fps_mode", "vfr", "-threads", "1"];
    const h264 = this.options.h264;
    const output = h264
      // Baseline, no B-frames, no encoder lookahead: each frame leaves as soon as it is encoded.
      ? ["-profile:v", "baseline", "-tune", "zerolatency", "-g", String(H264_KEY_INTERVAL_FRAMES), "-flush_packets", "1", "-f", "h264", "pipe:1"]
      : ["-f", "mp4", join(this.dir, "out.mp4")];
    const child = spawn(ffmpegBinary(), [...input, ...encode, ...output], { stdio: ["pipe", h264 ? "pipe" : "ignore", "pipe"] });
    if (h264) this.pipeOut(child, h264);
    this.ffmpeg = child;
    child.stderr?.on("data", (chunk: Buffer) => (this.stderr = (this.stderr + chunk.toString()).slice(-4096)));
    child.stdin?.on("error", () => {}); // EPIPE if ffmpeg dies first; reported via exit
    this.exited = new Promise((resolve) => {
      child.once("exit", (code) => resolve(code));
      child.once("error", (error) => {
        this.stderr += error.message;
        resolve(-1);
      });
    });
    this.unsubscribe = this.screen.onChange(() => this.scheduleFrame());
    this.limitTimer = setTimeout(() => void this.stop(), this.options.timeLimitMs);
    this.queueFrame();
    void this.exited.then((code) => {
      if (!this.stopping) void this.finalize(code);
    });
  }

  /** Passes the encoder's output on as it comes, pausing it while the sink is full. */
  private pipeOut(child: ChildProcess, sink: (chunk: Buffer) => Promise<void>): void {
    const out = child.stdout;
    if (!out) return;
    let writing: Promise<void> = Promise.resolve();
    out.on("data", (chunk: Buffer) => {
      out.pause();
      writing = writing.then(() => sink(chunk)).catch(() => {}).then(() => void out.resume());
    });
    this.drained = new Promise((resolve) => out.once("close", () => void writing.then(resolve)));
  }

  /** Graceful stop (SIGINT, time limit): the encoder drains and writes the moov atom. */
  stop(): Promise<RecordingResult> {
    if (!this.stopping) {
      this.stopping = true;
      void this.writing.then(() => {
        this.ffmpeg?.stdin?.end();
        return this.exited?.then((code) => this.finalize(code));
      });
    }
    return this.done;
  }

  /** Hard kill (SIGKILL, reboot): ffmpeg dies, the MP4 stays unfinalized. */
  kill(): Promise<RecordingResult> {
    if (!this.stopping) {
      this.stopping = true;
      this.killed = true;
      this.ffmpeg?.kill("SIGKILL");
      void this.exited?.then((code) => this.finalize(code));
    }
    return this.done;
  }

  private scheduleFrame(): void {
    if (this.stopping || this.pending) return;
    const wait = Math.max(0, this.lastFrameAt + 1000 / RECORD_MAX_FPS - Date.now());
    this.pending = setTimeout(() => {
      this.pending = undefined;
      this.queueFrame();
    }, wait);
  }

  private queueFrame(): void {
    this.lastFrameAt = Date.now();
    this.writing = this.writing.then(() => this.writeFrame()).catch(() => {});
  }

  private async writeFrame(): Promise<void> {
    const stdin = this.ffmpeg?.stdin;
    if (this.stopping || !stdin || stdin.destroyed) return;
    const pixels = await this.fit(await this.renderer.frame());
    if (!stdin.write(pixels)) {
      await new Promise<void>((resolve) => {
        // Whichever comes first; the other listener must not pile up frame after frame.
        const done = () => {
          stdin.off("drain", done).off("close", done);
          resolve();
        };
        stdin.once("drain", done).once("close", done);
      });
    }
    this.frames++;
    this.options.onFrame?.();
  }

  /** Frames keep the recording's size even if the display rotates or is resized. */
  private async fit(frame: Frame): Promise<Buffer> {
    const { width, height } = this.options.size;
    if (frame.width === width && frame.height === height) return frame.rgba;
    return sharp(frame.rgba, { raw: { width: frame.width, height: frame.height, channels: 4 } })
      .resize(width, height, { fit: "contain", background: { r: 0, g: 0, b: 0, alpha: 1 } })
      .ensureAlpha()
      .raw()
      .toBuffer();
  }

  private async finalize(code: number | null): Promise<void> {
    clearTimeout(this.limitTimer);
    clearTimeout(this.pending);
    this.unsubscribe?.();
    this.stopping = true;
    try {
      await this.drained;
      const bytes = this.dir && !this.options.h264 ? await readFile(join(this.dir, "out.mp4")).catch(() => Buffer.alloc(0)) : Buffer.alloc(0);
      if (!this.killed && code !== 0) throw new Error(`encoder failed (ffmpeg exit ${code}): ${this.stderr.trim()}`);
      this.finish({ bytes, frames: this.frames, killed: this.killed });
    } catch (error) {
      this.fail(error as Error);
    } finally {
      if (this.dir) await rm(this.dir, { recursive: true, force: true });
    }
  }
}
