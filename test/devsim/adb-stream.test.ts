import { describe, expect, it } from "vitest";
import { commandName } from "./protocol/constants.js";
import { AdbStream, type StreamLink } from "./transport/adb-stream.js";

interface Sent {
  command: string;
  arg0: number;
  arg1: number;
  payload: Buffer;
}

function fakeLink(maxPayload: number) {
  const sent: Sent[] = [];
  const forgotten: number[] = [];
  const link: StreamLink = {
    send: (command, arg0, arg1, payload = Buffer.alloc(0)) => sent.push({ command: commandName(command), arg0, arg1, payload: Buffer.concat(Array.isArray(payload) ? payload : [payload as Buffer]) }),
    maxPayload,
    forget: (id) => forgotten.push(id),
  };
  return { link, sent, forgotten };
}

describe("AdbStream flow control", () => {
  it("keeps one WRTE in flight, each at most maxPayload bytes", async () => {
    const { link, sent } = fakeLink(4);
    const stream = new AdbStream(1, 9, link);
    void stream.write("abcdefghij");
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ command: "WRTE", arg0: 1, arg1: 9 });
    expect(sent[0]!.payload.toString()).toBe("abcd");
    stream.onOkay();
    stream.onOkay();
    expect(sent.map((p) => p.payload.toString())).toEqual(["abcd", "efgh", "ij"]);
  });

  it("coalesces small writes into one WRTE and closes after the last one", async () => {
    const { link, sent, forgotten } = fakeLink(1024);
    const stream = new AdbStream(3, 5, link);
    await stream.write("a");
    await stream.write("b");
    await stream.write("c");
    stream.end();
    expect(sent.map((p) => p.command)).toEqual(["WRTE"]);
    stream.onOkay();
    expect(sent.map((p) => [p.command, p.payload.toString()])).toEqual([
      ["WRTE", "a"],
      ["WRTE", "bc"],
      ["CLSE", ""],
    ]);
    expect(stream.closed).toBe(true);
    expect(stream.signal.aborted).toBe(true);
    expect(forgotten).toEqual([3]);
  });

  it("applies backpressure to writers until the host acknowledges", async () => {
    const { link } = fakeLink(4);
    const stream = new AdbStream(1, 2, link);
    let resolved = false;
    const pending = stream.write("0123456789").then(() => (resolved = true));
    await Promise.resolve();
    expect(resolved).toBe(false);
    stream.onOkay(); // 4 sent, 2 queued: below the high-water mark
    await pending;
    expect(resolved).toBe(true);
  });

  it("acks host WRTEs only when the service reads them", async () => {
    const { link, sent } = fakeLink(1024);
    const stream = new AdbStream(1, 2, link);
    stream.onWrite(Buffer.from("in"));
    expect(sent).toEqual([]);
    expect((await stream.read())?.toString()).toBe("in");
    expect(sent.map((p) => [p.command, p.arg0, p.arg1])).toEqual([["OKAY", 1, 2]]);
    const next = stream.read();
    stream.onWrite(Buffer.from("more"));
    expect((await next)?.toString()).toBe("more");
    expect(sent).toHaveLength(2);
  });

  it("on host CLSE: echoes CLSE, aborts, and ends reads and writes", async () => {
    const { link, sent } = fakeLink(1024);
    const stream = new AdbStream(4, 8, link);
    const reading = stream.read();
    stream.onRemoteClose();
    expect(await reading).toBeNull();
    expect(stream.signal.aborted).toBe(true);
    expect(sent.map((p) => [p.command, p.arg0, p.arg1])).toEqual([["CLSE", 4, 8]]);
    await stream.write("ignored");
    stream.end();
    expect(sent).toHaveLength(1);
  });
});
