import { describe, expect, it } from "vitest";
import { LOG_LINE_MAX_CHARS, LogLineSplitter, parseLogLine } from "./logcat-lines.js";

const enc = (s: string) => new TextEncoder().encode(s);

describe("logcat lines", () => {
  it("parses a threadtime line into its fields, a tag with spaces included", () => {
    const l = parseLogLine("12-07 08:25:37.863  2000  2001 W Some Tag  : disk is 90% full");
    expect({ time: l.time, pid: l.pid, tid: l.tid, level: l.level, tag: l.tag, message: l.message }).toEqual({
      time: "12-07 08:25:37.863",
      pid: 2000,
      tid: 2001,
      level: "W",
      tag: "Some Tag",
      message: "disk is 90% full",
    });
    // A line of no known shape is kept whole, as its message.
    expect(parseLogLine("--------- beginning of main")).toMatchObject({ level: "", tag: "", message: "--------- beginning of main" });
  });

  it("gives whole lines as bytes arrive (a line and a UTF-8 character split across chunks), without farm's step markers", () => {
    const s = new LogLineSplitter();
    const full = "12-07 08:00:00.000  1  1 I a: h\u00e9llo\r\n12-07 08:00:00.001  2  2 I farmstep: begin 0123456789ab\n12-07 08:00:00.002  3  3 E b: bye\n";
    const bytes = enc(full);
    const cut = bytes.indexOf(0xa9); // inside "é"
    const first = s.push(bytes.subarray(0, cut));
    expect(first).toEqual([]);
    const rest = s.push(bytes.subarray(cut));
    expect(rest.map((l) => `${l.tag}:${l.message}`)).toEqual(["a:h\u00e9llo", "b:bye"]);
    expect(s.push(enc("12-07 08:00:00.003  4  4 D c: no newline"))).toEqual([]);
    expect(s.flush().map((l) => l.message)).toEqual(["no newline"]);
  });

  it("cuts a runaway line instead of holding it", () => {
    const s = new LogLineSplitter();
    for (let i = 0; i < 10; i++) s.push(enc("x".repeat(LOG_LINE_MAX_CHARS)));
    const [line] = s.push(enc("\n"));
    expect(line?.message.length).toBe(LOG_LINE_MAX_CHARS);
  });
});
