/**
 * main run in process (as the e2e tier's farm() runs it): what it prints
 * reaches the sinks it was given and nothing reaches the process's stdout or
 * stderr, and the HTTP/2 connection it opened to the coordinator is closed
 * when it returns, as a process's exit would close it. The coordinator is a
 * real Connect server over loopback in this process.
 */
import { createServer, type Http2Server, type ServerHttp2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { create } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { DeviceSchema } from "@farm/shared/gen/farm/v1/registry_pb";
import { main } from "./main.js";

let server: Http2Server | undefined;
const sessions: ServerHttp2Session[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const s of sessions.splice(0)) s.destroy();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  server = undefined;
});

/** A coordinator that lists one phone; each connection it accepts is kept, with a promise of its close. */
async function coordinator(): Promise<{ url: string; closed: Promise<void>[] }> {
  const closed: Promise<void>[] = [];
  server = createServer(connectNodeAdapter({
    routes: (router: ConnectRouter) =>
      void router.service(RegistryService, {
        listDevices: () => ({ devices: [create(DeviceSchema, { serial: "S1", state: "device" })], nextPageToken: "" }),
      }),
  }));
  server.on("session", (s: ServerHttp2Session) => {
    sessions.push(s);
    closed.push(new Promise((resolve) => s.once("close", () => resolve())));
  });
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, closed };
}

function envFor(url: string): NodeJS.ProcessEnv {
  return { FARM_CONFIG: "/nonexistent/farm/config.json", FARM_COORDINATOR: url, FARM_TOKEN: "farmu_test" };
}

/** Counts what is written to the process's own stdout and stderr while `work` runs. */
async function processWrites<T>(work: () => Promise<T>): Promise<{ result: T; writes: string[] }> {
  const writes: string[] = [];
  vi.spyOn(process.stdout, "write").mockImplementation((s: string | Uint8Array) => (writes.push(String(s)), true));
  vi.spyOn(process.stderr, "write").mockImplementation((s: string | Uint8Array) => (writes.push(String(s)), true));
  try {
    return { result: await work(), writes };
  } finally {
    vi.restoreAllMocks();
  }
}

describe("main in process", () => {
  it("prints to its sinks only: the result on out, --verbose's request line on err", async () => {
    const { url } = await coordinator();
    let out = "";
    let err = "";
    const { result: code, writes } = await processWrites(() => main(["devices", "--verbose", "-o", "json"], envFor(url), { out: (s) => (out += s), err: (s) => (err += s) }));
    expect(code).toBe(0);
    expect(JSON.parse(out)).toMatchObject({ ok: true, devices: [{ serial: "S1", state: "device" }] });
    expect(err).toMatch(/^farm: farm\.v1\.RegistryService\/ListDevices x-request-id=\S+ ok \d+ ms\n$/);
    expect(writes).toEqual([]);
  });

  it("prints a failure for people on its err sink, and help on its out sink", async () => {
    let out = "";
    let err = "";
    const sinks = { out: (s: string) => (out += s), err: (s: string) => (err += s) };
    const { result: code, writes } = await processWrites(async () => {
      const refused = await main(["devices", "--bogus", "-o", "pretty"], envFor("http://127.0.0.1:1"), sinks);
      const help = await main(["devices", "--help"], envFor("http://127.0.0.1:1"), sinks);
      return [refused, help];
    });
    expect(code).toEqual([64, 0]);
    expect(err).toMatch(/^error: .*bogus.*\[INVALID_ARGUMENT, field bogus\]\n$/);
    expect(out).toMatch(/Usage: farm devices/);
    expect(writes).toEqual([]);
  });

  it("takes json as its format when nothing asks for one: its stdout is not a terminal", async () => {
    const { url } = await coordinator();
    let out = "";
    const code = await main(["devices"], envFor(url), { out: (s) => (out += s), err: () => undefined });
    expect(code).toBe(0);
    expect(JSON.parse(out)).toMatchObject({ ok: true });
  });

  it("closes the connection it opened when it returns", async () => {
    const { url, closed } = await coordinator();
    const code = await main(["devices"], envFor(url), { out: () => undefined, err: () => undefined });
    expect(code).toBe(0);
    expect(closed).toHaveLength(1);
    // The coordinator's side of the connection closes: resolves only once the client has gone (the test's timeout otherwise).
    await closed[0];
    expect(sessions[0]?.closed || sessions[0]?.destroyed).toBe(true);
  });

  it("installs no signal handlers in process", async () => {
    const { url } = await coordinator();
    const before = [process.listenerCount("SIGINT"), process.listenerCount("SIGTERM")];
    let during: number[] = [];
    const run = main(["devices"], envFor(url), {
      out: () => (during = [process.listenerCount("SIGINT"), process.listenerCount("SIGTERM")]),
      err: () => undefined,
    });
    expect(await run).toBe(0);
    expect(during).toEqual(before);
  });
});
