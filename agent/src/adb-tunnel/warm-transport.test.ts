import { connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { AdbServiceError } from "../adb/adb-service.js";
import { startSimPhones, type SimPhones } from "../testing/sim-phones.js";
import { WarmTransport } from "./warm-transport.js";

// A tunnel's spare connection to a real adb server with a simulated phone
// behind it: what is opened on it, and what happens when the phone goes.

let lab: SimPhones<unknown> | undefined;
let warm: WarmTransport | undefined;

afterEach(async () => {
  warm?.close();
  warm = undefined;
  await lab?.stop();
  lab = undefined;
});

/** Everything the service's socket gives until it ends. */
async function output(o: { socket: Socket; leftover: Buffer }): Promise<string> {
  const parts = [o.leftover];
  for await (const chunk of o.socket as AsyncIterable<Buffer>) parts.push(chunk);
  return Buffer.concat(parts).toString();
}

/** host:disconnect:SERIAL on the adb server: the phone's transport goes away. */
function disconnect(port: number, serial: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: "127.0.0.1", port }, () => {
      const req = `host:disconnect:${serial}`;
      s.write(req.length.toString(16).padStart(4, "0") + req);
    });
    s.on("data", () => undefined);
    s.once("error", reject);
    s.once("close", () => resolve());
  });
}

describe("WarmTransport", () => {
  it("opens each service on the spare made ahead, and makes the next one after each use", async () => {
    lab = await startSimPhones(1);
    const serial = lab.phones[0]!.serial;
    warm = new WarmTransport(lab.addr, serial);
    warm.prepare();
    await warm.made();
    expect(warm.hasSpare).toBe(true);
    for (const word of ["one", "two", "three"]) {
      const opened = warm.open(`shell:echo ${word}`, AbortSignal.timeout(20_000));
      // Taken at once: the next is on its way while this one opens.
      expect(warm.hasSpare).toBe(false);
      expect(await output(await opened)).toBe(`${word}\n`);
      await warm.made();
      expect(warm.hasSpare).toBe(true);
    }
  });

  it("drops a spare whose phone went away; the stream then opens the old way and gets the adb server's refusal", async () => {
    lab = await startSimPhones(1);
    const serial = lab.phones[0]!.serial;
    warm = new WarmTransport(lab.addr, serial);
    warm.prepare();
    await warm.made();
    expect(warm.hasSpare).toBe(true);
    await disconnect(lab.addr.port, serial);
    // The adb server closes the connections bound to a transport it drops.
    await expect.poll(() => warm?.hasSpare).toBe(false);
    const err = await warm.open("shell:echo hi", AbortSignal.timeout(20_000)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AdbServiceError);
    // Refused by the server: it never reached a phone.
    expect((err as AdbServiceError).phase).toBe("before");
    expect((err as AdbServiceError).code).toBe("DEVICE_OFFLINE");
  });

  it("makes no spare once closed", async () => {
    lab = await startSimPhones(1);
    warm = new WarmTransport(lab.addr, lab.phones[0]!.serial);
    warm.prepare();
    warm.close();
    await warm.made();
    expect(warm.hasSpare).toBe(false);
    warm.prepare();
    expect(warm.hasSpare).toBe(false);
    await warm.made();
    expect(warm.hasSpare).toBe(false);
  });
});
