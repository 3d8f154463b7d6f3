import { createHash } from "node:crypto";
import { once } from "node:events";
import { createServer, connect, type AddressInfo, type Server, type Socket } from "node:net";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { MESSAGE_BYTES, relayAdbStream, SOCKET_AHEAD_BYTES } from "./adb-stream.js";
import { ByteBudget } from "./byte-budget.js";
import { fakeServeAdbStream, readData } from "./fake-serve-adb-stream.js";

/**
 * The relay between a device socket and its ServeAdbStream call, over a
 * plain loopback socket pair: `far` stands where the adb server is. The
 * real adb server and a simulated phone are in adb-tunnels.test.ts.
 */

let server: Server;
let far: Socket;
let near: Socket;

beforeEach(async () => {
  server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const accepted = once(server, "connection") as Promise<[Socket]>;
  near = connect((server.address() as AddressInfo).port, "127.0.0.1");
  await once(near, "connect");
  [far] = await accepted;
  far.on("error", () => undefined);
});

afterEach(async () => {
  near.destroy();
  far.destroy();
  server.close();
  await once(server, "close");
});

const sha = (b: Buffer | Uint8Array) => createHash("sha256").update(b).digest("hex");

describe("relayAdbStream", () => {
  it("names the stream first, sends the leftover bytes before the socket's, and writes responses to the device", async () => {
    const coord = fakeServeAdbStream();
    const counts = { from: 0, to: 0 };
    const relay = relayAdbStream({
      streamId: "s-1",
      socket: near,
      leftover: Buffer.from("first "),
      serve: coord.serve,
      onFromDevice: (n) => (counts.from += n),
      onToDevice: (n) => (counts.to += n),
    });
    const call = await coord.nextCall();
    const { requests } = call;
    expect((await requests.next()).value).toMatchObject({ kind: { case: "streamId", value: "s-1" } });
    far.write("second");
    expect((await readData(requests, 12)).data.toString()).toBe("first second");

    const got = once(far, "data");
    call.send(Buffer.from("to the phone"));
    expect(String((await got)[0])).toBe("to the phone");

    // The device ends its side: the request stream ends after its last bytes.
    far.end("last");
    expect(await readData(requests)).toEqual({ data: Buffer.from("last"), ended: true });
    call.end();
    await relay.done;
    expect(counts).toEqual({ from: 16, to: 12 });
  });

  it("ends the device socket when the response stream ends, after what was written", async () => {
    const coord = fakeServeAdbStream();
    const relay = relayAdbStream({ streamId: "s", socket: near, leftover: Buffer.alloc(0), serve: coord.serve });
    const call = await coord.nextCall();
    const received: Buffer[] = [];
    far.on("data", (b: Buffer) => received.push(b));
    const ended = once(far, "end");
    call.send(Buffer.from("bye"));
    call.end();
    await ended;
    expect(Buffer.concat(received).toString()).toBe("bye");
    far.end();
    await relay.done;
  });

  it("destroys the device socket when the response stream fails", async () => {
    const coord = fakeServeAdbStream();
    const relay = relayAdbStream({ streamId: "s", socket: near, leftover: Buffer.alloc(0), serve: coord.serve });
    const call = await coord.nextCall();
    const { requests } = call;
    await requests.next();
    const closed = once(far, "close");
    call.fail(new Error("coordinator went away"));
    await closed;
    await relay.done;
    expect(near.destroyed).toBe(true);
  });

  it("close() cuts both sides", async () => {
    const coord = fakeServeAdbStream();
    const relay = relayAdbStream({ streamId: "s", socket: near, leftover: Buffer.alloc(0), serve: coord.serve });
    const { signal } = await coord.nextCall();
    const closed = once(far, "close");
    relay.close();
    await closed;
    await relay.done;
    expect(signal.aborted).toBe(true);
  });

  it("pauses the device socket while too much waits for the coordinator, and loses nothing", async () => {
    const coord = fakeServeAdbStream();
    const high = 256 * 1024;
    let counted = 0;
    relayAdbStream({ streamId: "s", socket: near, leftover: Buffer.alloc(0), serve: coord.serve, highWaterBytes: high, lowWaterBytes: 64 * 1024, onFromDevice: (n) => (counted += n) });
    const call = await coord.nextCall();
    const { requests } = call;
    await requests.next();
    const total = 8 * 1024 * 1024;
    const payload = Buffer.alloc(total);
    for (let i = 0; i < total; i += 4) payload.writeUInt32LE(i, i);
    const paused = once(near, "pause");
    far.end(payload);
    await paused;
    // Nobody reads the requests: at most the high water mark and one socket read are held.
    expect(counted).toBeLessThanOrEqual(high + 64 * 1024);
    expect(counted).toBeLessThan(total);
    const resumed = once(near, "resume");
    const { data, ended } = await readData(requests);
    await resumed;
    expect(ended).toBe(true);
    expect(data.length).toBe(total);
    expect(sha(data)).toBe(sha(payload));
    call.end();
  });

  it("joins the device reads that queued while the call was busy into messages of at most MESSAGE_BYTES, in order; a lone read goes as it is", async () => {
    const coord = fakeServeAdbStream();
    const total = 1024 * 1024;
    let reads = 0;
    let counted = 0;
    let allRead = () => {};
    const read = new Promise<void>((resolve) => (allRead = resolve));
    relayAdbStream({
      streamId: "s",
      socket: near,
      leftover: Buffer.alloc(0),
      serve: coord.serve,
      highWaterBytes: 4 * total,
      onFromDevice: (n) => {
        reads += 1;
        counted += n;
        if (counted === total) allRead();
      },
    });
    const call = await coord.nextCall();
    const { requests } = call;
    await requests.next();
    const payload = Buffer.alloc(total);
    for (let i = 0; i < total; i += 4) payload.writeUInt32LE(i, i);
    far.write(payload);
    // Nobody reads the call's requests until the device's bytes have all been read from its socket.
    await read;
    const sizes: number[] = [];
    const got: Buffer[] = [];
    while (got.reduce((n, b) => n + b.length, 0) < total) {
      const m = await requests.next();
      if (m.done || m.value.kind.case !== "data") throw new Error("the call ended early");
      sizes.push(m.value.kind.value.length);
      got.push(Buffer.from(m.value.kind.value));
    }
    expect(sha(Buffer.concat(got))).toBe(sha(payload));
    expect(Math.max(...sizes)).toBeLessThanOrEqual(MESSAGE_BYTES);
    expect(sizes.length).toBeLessThan(reads);
    // Caught up: the next read travels alone, not held back to be joined.
    const next = requests.next();
    far.write("x");
    const m = await next;
    expect(m.value).toMatchObject({ kind: { case: "data" } });
    expect(Buffer.from((m.value as { kind: { value: Uint8Array } }).kind.value).toString()).toBe("x");
    call.end();
  });

  it("takes the next response only while the device socket holds at most SOCKET_AHEAD_BYTES", async () => {
    const coord = fakeServeAdbStream();
    const chunk = 1024 * 1024;
    const chunks = 24;
    let maxBufferedAtPull = 0;
    relayAdbStream({ streamId: "s", socket: near, leftover: Buffer.alloc(0), serve: coord.serve });
    const call = await coord.nextCall();
    call.onPull = () => (maxBufferedAtPull = Math.max(maxBufferedAtPull, near.writableLength));
    const sent = createHash("sha256");
    for (let i = 0; i < chunks; i++) {
      const b = Buffer.alloc(chunk, i);
      sent.update(b);
      call.send(b);
    }
    call.end();
    const got = createHash("sha256");
    let n = 0;
    far.on("data", (b: Buffer) => {
      got.update(b);
      n += b.length;
    });
    await once(far, "end");
    expect(n).toBe(chunk * chunks);
    expect(got.digest("hex")).toBe(sent.digest("hex"));
    // Responses are all queued at once; a relay that ignored its socket's buffer would hold all 24 MiB of them there.
    expect(maxBufferedAtPull).toBeLessThanOrEqual(SOCKET_AHEAD_BYTES);
  });

  it("holds no more than the shared budget for devices that read nothing, and close() frees it all", async () => {
    // Eight streams to devices that read nothing; each holds the chunk it could not write, and a
    // shared 1 MiB budget lets four of them do so: the other four wait without reading a response.
    const budget = new ByteBudget(1024 * 1024);
    const chunk = Buffer.alloc(256 * 1024, 7);
    const relays = [];
    const pairs: Socket[] = [];
    for (let i = 0; i < 8; i++) {
      const accepted = once(server, "connection") as Promise<[Socket]>;
      const dev = connect((server.address() as AddressInfo).port, "127.0.0.1");
      await once(dev, "connect");
      const [peer] = await accepted;
      peer.pause();
      peer.on("error", () => undefined);
      pairs.push(dev, peer);
      const coord = fakeServeAdbStream();
      relays.push(relayAdbStream({ streamId: `s-${i}`, socket: dev, leftover: Buffer.alloc(0), serve: coord.serve, budget }));
      const call = await coord.nextCall();
      // Every response the relay asks for is there at once: only the socket and the budget stop it.
      call.onPull = () => call.send(chunk);
      call.send(chunk);
    }
    await vi.waitFor(() => expect(budget.held).toBe(budget.limit), { timeout: 60_000, interval: 20 });
    expect(budget.peak).toBe(budget.limit);
    for (const r of relays) r.close();
    await Promise.all(relays.map((r) => r.done));
    expect(budget.held).toBe(0);
    for (const p of pairs) p.destroy();
  });
});
