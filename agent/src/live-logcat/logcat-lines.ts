import { create } from "@bufbuild/protobuf";
import { LogLineSchema, type LogLine } from "@farm/shared/gen/farm/v1/logcat_service_pb";
import { isStepMarkerLine } from "../session/step-markers.js";

/** A line longer than this is cut: logcat's own limit is about 4 KiB a message. */
export const LOG_LINE_MAX_CHARS = 4096;

// threadtime: "MM-DD HH:MM:SS.mmm  PID  TID P TAG: message" (the tag may hold spaces, padded before the colon).
const THREADTIME = /^(\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\s+(\d+)\s+(\d+) ([VDIWEFS]) (.*?)\s*: (.*)$/;

/** One threadtime line as a LogLine; a line in no known shape (a "--------- beginning of main" banner) is kept as its message. */
export function parseLogLine(text: string): LogLine {
  const m = THREADTIME.exec(text);
  if (!m) return create(LogLineSchema, { message: text });
  return create(LogLineSchema, { time: m[1] ?? "", pid: Number(m[2]), tid: Number(m[3]), level: m[4] ?? "", tag: m[5] ?? "", message: m[6] ?? "" });
}

/**
 * Splits logcat's output into lines as bytes arrive: whole lines come out,
 * the tail waits for the rest. farm's own step markers are left out (as
 * `farm logcat` leaves them out), and lines are cut at LOG_LINE_MAX_CHARS
 * so one runaway line cannot hold memory.
 */
export class LogLineSplitter {
  private tail = "";
  private readonly decoder = new TextDecoder();

  push(chunk: Uint8Array): LogLine[] {
    const text = this.tail + this.decoder.decode(chunk, { stream: true });
    const parts = text.split("\n");
    this.tail = (parts.pop() ?? "").slice(0, LOG_LINE_MAX_CHARS);
    return this.lines(parts);
  }

  /** The stream ended: its last line, if it had no newline. */
  flush(): LogLine[] {
    const rest = this.tail + this.decoder.decode();
    this.tail = "";
    return rest === "" ? [] : this.lines([rest]);
  }

  private lines(parts: string[]): LogLine[] {
    const out: LogLine[] = [];
    for (const raw of parts) {
      const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
      if (line === "" || isStepMarkerLine(line)) continue;
      out.push(parseLogLine(line.slice(0, LOG_LINE_MAX_CHARS)));
    }
    return out;
  }
}
