import { once } from "node:events";
import { connect, type Socket } from "node:net";
import { Duplex } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { A_CLSE, A_CNXN, A_OKAY, A_OPEN, A_VERSION_SKIP_CHECKSUM, A_WRTE, MAX_PAYLOAD, PacketParser, encodePacket, type AdbPacket } from "./adb-packet.js";
import { startLocalAdbd, type LocalAdbd } from "./local-adbd.js";

/**
 * The endpoint against a raw adb host written here, so the host can break
 * the protocol in ways a real adb server never does. The phone's side is a
 * stream that takes nothing: a phone that reads nothing.
 */

let endpoint: LocalAdbd | undefined;
let host: Socket | undefined;
afterEach(async () => {
  host?.destroy();
  await endpoint?.close();
});

/** A backend that never takes a byte: writes stay pending, as to a phone that reads nothing. */
function stalledPhone(): Duplex {
  return new Duplex({
    read() {},
    write() {
      // Never calls back.
    },
  });
}

/** Connects as an adb host, exchanges CNXN, opens `service`: resolves with the stream's ids and a way to read packets. */
async function openAsHost(port: number, service: string, maxPayload = MAX_PAYLOAD) {
  const socket = connect(port, "127.0.0.1");
  host = socket;
  // Dropped mid-write, the host sees a reset: the close is what the test waits for.
  socket.on("error", () => undefined);
  await once(socket, "connect");
  const parser = new PacketParser(MAX_PAYLOAD);
  const queue: AdbPacket[] = [];
  let wake: (() => void) | undefined;
  socket.on("data", (d: Buffer) => {
    queue.push(...parser.push(d));
    wake?.();
  });
  const next = async (): Promise<AdbPacket> => {
    while (queue.length === 0) await new Promise<void>((r) => (wake = r));
    return queue.shift() as AdbPacket;
  };
  socket.write(encodePacket(A_CNXN, A_VERSION_SKIP_CHECKSUM, maxPayload, Buffer.from("host::features=shell_v2")));
  expect((await next()).command).toBe(A_CNXN);
  socket.write(encodePacket(A_OPEN, 7, 0, Buffer.from(`${service}\0`)));
  const okay = await next();
  expect(okay.command).toBe(A_OKAY);
  return { socket, next, localId: okay.arg0, pending: () => queue.length };
}

/** A phone whose output the test pushes (null: its side ends) and that takes every write. */
function scriptedPhone(): Duplex {
  return new Duplex({
    read() {},
    write(_chunk, _enc, done) {
      done();
    },
  });
}

describe("the local adbd endpoint against a host that breaks the protocol", () => {
  it("drops the connection when the host sends another WRTE before its last was acknowledged, and says why", async () => {
    const logged: string[] = [];
    let phone: Duplex | undefined;
    endpoint = await startLocalAdbd({
      openStream: async () => (phone = stalledPhone()),
      log: (line) => logged.push(line),
      acceptPeer: () => true,
    });
    const { socket, localId } = await openAsHost(endpoint.port, "shell:cat");
    // (events.once would reject on the reset the host sees first.)
    const closed = new Promise((resolve) => socket.once("close", resolve));
    // A flood: WRTE after WRTE without waiting for an OKAY. The phone took none of them; without
    // the check every one would be buffered for it.
    const chunk = Buffer.alloc(64 * 1024, 1);
    for (let i = 0; i < 64 && !socket.destroyed; i++) socket.write(encodePacket(A_WRTE, 7, localId, chunk));
    await closed;
    expect(logged.join("\n")).toMatch(/another WRTE on stream \d+ before its last one was acknowledged; dropping its connection/);
    expect(phone?.destroyed).toBe(true);
    expect(endpoint.connectionCount()).toBe(0);
  });

  it("keeps a host that waits for each OKAY", async () => {
    endpoint = await startLocalAdbd({
      openStream: async () =>
        new Duplex({
          read() {},
          write(_chunk, _enc, done) {
            done();
          },
        }),
      acceptPeer: () => true,
    });
    const { next, localId } = await openAsHost(endpoint.port, "shell:cat");
    for (let i = 0; i < 8; i++) {
      host?.write(encodePacket(A_WRTE, 7, localId, Buffer.alloc(4096, i)));
      expect((await next()).command).toBe(A_OKAY);
    }
    expect(endpoint.connectionCount()).toBe(1);
  });
});

describe("the phone's bytes to the host", () => {
  it("sends what arrived while a WRTE waited for its OKAY as one WRTE, and none before that OKAY", async () => {
    let phone: Duplex | undefined;
    endpoint = await startLocalAdbd({ openStream: async () => (phone = scriptedPhone()), acceptPeer: () => true });
    const { next, localId, socket, pending } = await openAsHost(endpoint.port, "shell:cat");
    // The stream was opened (its OKAY came) once the phone's side was there.
    const p = phone as Duplex;
    p.push(Buffer.alloc(1000, 1));
    const first = await next();
    expect(first.command).toBe(A_WRTE);
    expect(first.payload).toEqual(Buffer.alloc(1000, 1));
    // While that WRTE is not acknowledged, three more messages come from the phone.
    p.push(Buffer.alloc(2000, 2));
    p.push(Buffer.alloc(3000, 3));
    p.push(Buffer.alloc(4000, 4));
    // Give the endpoint every chance to send early; a WRTE before our OKAY would be a protocol breach.
    await new Promise((r) => setTimeout(r, 50));
    expect(pending()).toBe(0);
    socket.write(encodePacket(A_OKAY, 7, localId));
    const second = await next();
    expect(second.command).toBe(A_WRTE);
    expect(second.payload).toEqual(Buffer.concat([Buffer.alloc(2000, 2), Buffer.alloc(3000, 3), Buffer.alloc(4000, 4)]));
    socket.write(encodePacket(A_OKAY, 7, localId));
    p.push(null);
    expect((await next()).command).toBe(A_CLSE);
  });

  it("closes right after the last WRTE once the phone's side ended, without waiting for its OKAY (as adbd does)", async () => {
    let phone: Duplex | undefined;
    endpoint = await startLocalAdbd({ openStream: async () => (phone = scriptedPhone()), acceptPeer: () => true });
    const { next, localId } = await openAsHost(endpoint.port, "shell,v2,raw:echo x");
    phone?.push(Buffer.from("x\n"));
    phone?.push(null);
    const wrte = await next();
    expect(wrte.command).toBe(A_WRTE);
    expect(wrte.payload.toString()).toBe("x\n");
    // No OKAY from the host: the CLSE comes anyway.
    const clse = await next();
    expect(clse.command).toBe(A_CLSE);
    expect(clse.arg0).toBe(localId);
    expect(clse.arg1).toBe(7);
  });

  it("splits more than the negotiated payload into WRTEs that each wait for their OKAY; the last one's CLSE does not", async () => {
    let phone: Duplex | undefined;
    endpoint = await startLocalAdbd({ openStream: async () => (phone = scriptedPhone()), acceptPeer: () => true });
    const { next, localId, socket, pending } = await openAsHost(endpoint.port, "shell:cat", 4096);
    const bytes = Buffer.from(Array.from({ length: 10_000 }, (_, i) => i % 251));
    phone?.push(bytes);
    phone?.push(null);
    const got: Buffer[] = [];
    for (let i = 0; i < 3; i++) {
      const w = await next();
      expect(w.command).toBe(A_WRTE);
      expect(w.payload.length).toBe(i < 2 ? 4096 : 10_000 - 8192);
      got.push(w.payload);
      if (i < 2) {
        // The next WRTE waits for this OKAY, although the phone's side has ended.
        await new Promise((r) => setTimeout(r, 20));
        expect(pending()).toBe(0);
        socket.write(encodePacket(A_OKAY, 7, localId));
      }
    }
    expect(Buffer.concat(got)).toEqual(bytes);
    expect((await next()).command).toBe(A_CLSE);
  });
});

describe("the host's close", () => {
  it("lets what the host wrote reach the phone before its side is cut, even while a WRTE of ours waits for its OKAY", async () => {
    const written: Buffer[] = [];
    let release: (() => void) | undefined;
    let finished = () => {};
    const finalled = new Promise<void>((resolve) => (finished = resolve));
    // A phone slow to take the host's bytes: each write completes when the test says so.
    const phone = new Duplex({
      read() {},
      write(chunk: Buffer, _enc, done) {
        written.push(chunk);
        release = () => done();
      },
      final(done) {
        finished();
        done();
      },
    });
    endpoint = await startLocalAdbd({ openStream: async () => phone, acceptPeer: () => true });
    const { next, localId, socket } = await openAsHost(endpoint.port, "shell:cat");
    // Our WRTE to the host, left unacknowledged.
    phone.push(Buffer.from("out"));
    expect((await next()).command).toBe(A_WRTE);
    // The host writes (the phone has not taken it yet) and closes.
    socket.write(encodePacket(A_WRTE, 7, localId, Buffer.from("in")));
    expect((await next()).command).toBe(A_OKAY);
    socket.write(encodePacket(A_CLSE, 7, localId));
    while (!phone.writableEnded) await new Promise((r) => setImmediate(r));
    expect(phone.destroyed).toBe(false);
    release?.();
    await finalled;
    expect(Buffer.concat(written).toString()).toBe("in");
    phone.push(null);
  });
});
