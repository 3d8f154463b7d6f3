/**
 * The hot path (hot-path.ts) is the same command as commander's: on every
 * command line it takes, both parse to the same command, options, sources
 * and words; every other line it leaves to commander. And main prints the
 * same, with the same exit code, whichever parsed it: results (json,
 * pretty, wide), refusals and errors, against a real Connect coordinator
 * over loopback in this process.
 */
import { createServer, type Http2Server, type ServerHttp2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { DeviceSchema } from "@farm/shared/gen/farm/v1/registry_pb";
import { connectionScope } from "@farm/client/connections";
import { main } from "../main.js";
import { createPrinter } from "../output.js";
import type { ParsedCommand, Runtime } from "./build.js";
import { HOT_COMMANDS, parseHot } from "./hot-path.js";
import { parseOnly } from "./parse-for-test.js";
import { runLeaf } from "./run-leaf.js";

const env = { FARM_CONFIG: "/nonexistent/farm/config.json" };

/** What the hot path parses a line to, resolved by run-leaf.ts as a command would be (nothing runs). */
async function hotParse(argv: string[], e: NodeJS.ProcessEnv = env): Promise<ParsedCommand | undefined> {
  const hot = parseHot(argv);
  if (!hot) return undefined;
  let parsed: ParsedCommand | undefined;
  const rt: Runtime = {
    env: e,
    printer: createPrinter("json", () => undefined, () => undefined),
    format: "json",
    stopSignal: new AbortController().signal,
    commandTree: () => {
      throw new Error("not used");
    },
    connections: connectionScope(),
    writeOut: () => undefined,
    writeErr: () => undefined,
    intercept: (p) => (parsed = p),
  };
  await runLeaf(hot.spec, rt, hot.path, hot.flags, hot.args);
  return parsed;
}

const named = (lines: string[][]) => lines.map((argv) => ({ line: argv.join(" "), argv }));

const same = (p: ParsedCommand | undefined) => p && { path: p.path, spec: p.spec.name, shortcutOf: p.spec.shortcutOf, opts: p.opts, sources: p.sources, args: p.args };

describe("the hot path parses as commander does", () => {
  const taken: string[][] = [
    ["shell", "--", "true"],
    ["shell", "--", "getprop", "ro.product.model"],
    ["shell", "--", "ls", "-l", "--", "/sdcard"],
    ["shell", "--device", "S1", "--lease", "farml_x", "--", "echo", "hi"],
    ["shell", "--device=S1", "--verbose", "--timeout", "5000", "--", "true"],
    ["shell", "--request-id", "r1", "--agent", "a1", "--verbose", "--verbose", "--", "id"],
    ["shell", "echo", "--", "hi"],
    ["shell", "true"],
    ["shell"],
    ["shell", "--"],
    ["shell", "--device", "S1"],
    ["shell", "--coordinator", "http://10.0.0.1:7420", "--insecure", "--token-file", "/t", "--ca-file", "/ca", "--", "true"],
    ["devices"],
    ["devices", "--state", "device", "--agent", "lab-1"],
    ["devices", "--timeout=200", "--verbose"],
    ["screenshot", "--device", "S1", "shot.png"],
    ["screenshot", "shot.png"],
    ["screenshot", "help"],
    ["screenshot", "--output", "shot.png"],
    ["screenshot", "--output=shot.png", "--device", "S1"],
    ["screenshot"],
    ["input", "tap", "540", "1200"],
    ["input", "--device", "S1", "text", "hello"],
    ["input", "tap", "--text", "Sign in"],
    ["input", "key", "KEYCODE_HOME", "--lease", "farml_y"],
    ["input", "swipe", "--", "1", "2", "3", "4", "300"],
    ["input", "tap", "--", "-5", "10"],
  ];
  it.each(named(taken))("takes `$line`, as commander parses it", async ({ argv }) => {
    const full = await parseOnly(argv, env);
    expect(full.error).toBeUndefined();
    const lean = await hotParse(argv);
    expect(lean).toBeDefined();
    expect(same(lean)).toEqual(same(full.parsed));
  });

  it("resolves the environment and defaults alike", async () => {
    const e = { ...env, FARM_DEVICE: "S9", FARM_LEASE: "farml_e", FARM_COORDINATOR: "http://127.0.0.1:9" };
    for (const argv of [["shell", "--", "true"], ["shell", "--device", "S1", "--", "true"], ["devices"]]) {
      const full = await parseOnly(argv, e);
      expect(same(await hotParse(argv, e))).toEqual(same(full.parsed));
    }
  });

  const left: string[][] = [
    ["shell", "--help"],
    ["shell", "-h"],
    ["shell", "--device"],
    ["shell", "--device", "S1", "--device", "S2", "--", "true"],
    ["shell", "--bogus", "--", "true"],
    ["shell", "ls", "-l"],
    ["shell", "--verbose=1", "--", "true"],
    ["shell", "--device=", "--", "true"],
    ["shell", "--device", "-x", "--", "true"],
    ["devices", "extra"],
    ["devices", "--", "extra"],
    ["input"],
    ["input", "swipe", "-5"],
    ["screenshot", "a.png", "b.png"],
    ["screenshot", "--output", "a.png", "--output", "b.png"],
    ["device", "shell", "--", "true"],
    ["--verbose", "shell", "--", "true"],
    ["lease", "list"],
    [],
  ];
  it.each(named(left))("leaves `$line` to commander", ({ argv }) => {
    expect(parseHot(argv)).toBeUndefined();
  });

  it("takes only the hot commands, each a shortcut of the tree", async () => {
    for (const name of HOT_COMMANDS) {
      const hot = parseHot([name, "--", "x"]) ?? parseHot([name, "x", "y"]) ?? parseHot([name]);
      expect(hot?.spec.name).toBe(name);
      expect(hot?.spec.shortcutOf).toMatch(/^device /);
    }
  });
});

describe("main prints the same on either path", () => {
  let server: Http2Server;
  const sessions: ServerHttp2Session[] = [];
  let url = "";
  beforeAll(async () => {
    server = createServer(connectNodeAdapter({
      routes: (router: ConnectRouter) => {
        router.service(RegistryService, {
          listDevices: () => ({
            devices: [
              create(DeviceSchema, { serial: "S1", state: "device", agentName: "lab-1", properties: { physicalId: "phys-0123456789abcdef", model: "Pixel 7", apiLevel: 34 } }),
              create(DeviceSchema, { serial: "S2", state: "offline", agentName: "lab-1" }),
            ],
            nextPageToken: "",
          }),
        });
        router.service(DeviceService, {
          runShell: (req) => {
            if (req.target?.serial === "GONE") throw new ConnectError("no device matches GONE", Code.NotFound);
            return { actionId: "a-1", exitCode: req.command === "false" ? 1 : 0, stdout: new TextEncoder().encode(`ran ${req.command}\n`), stderr: new Uint8Array(), dispatched: true };
          },
        });
      },
    }));
    server.on("session", (session: ServerHttp2Session) => sessions.push(session));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const session of sessions) session.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  async function run(argv: string[], hotPath: boolean): Promise<{ code: number; out: string; err: string }> {
    let out = "";
    let err = "";
    const e = { FARM_CONFIG: "/nonexistent/farm/config.json", FARM_COORDINATOR: url, FARM_TOKEN: "farmu_test", FARM_LEASE: "farml_t" };
    const code = await main(argv, e, { out: (s) => (out += s), err: (s) => (err += s) }, { hotPath });
    // The request id and the call's time differ from run to run.
    return { code, out, err: err.replace(/x-request-id=\S+ ok \d+ ms/g, "x-request-id=ID ok N ms") };
  }

  const lines: string[][] = [
    ["devices"],
    ["devices", "-o", "pretty"],
    ["devices", "-o", "wide"],
    ["devices", "--verbose", "-o", "json"],
    ["shell", "--device", "S1", "--", "echo", "hi"],
    ["shell", "--device", "S1", "-o", "pretty", "--", "echo", "hi"],
    ["shell", "--device", "S1", "--", "false"],
    ["shell", "--device", "GONE", "--", "true"],
    ["shell", "--device", "GONE", "-o", "pretty", "--", "true"],
    ["shell", "--", "true"],
    ["shell", "--device", "S1", "--timeout", "5", "--", "true"],
    ["shell", "--device", "S1", "--capture", "screenshot.after", "--", "true"],
  ];
  it.each(named(lines))("`farm $line`", async ({ argv }) => {
    expect(parseHot(argv.filter((a, i) => !(a === "-o" || argv[i - 1] === "-o")))).toBeDefined();
    const lean = await run(argv, true);
    const full = await run(argv, false);
    expect(lean).toEqual(full);
    expect(lean.out + lean.err).not.toBe("");
  });

  it("help and a refused flag are commander's on both", async () => {
    for (const argv of [["shell", "--help"], ["devices", "--bogus"], ["shell", "ls", "-l"], ["devices", "--output", "yaml"], ["shell", "--device", "S1", "--device", "S2", "--", "true"]]) {
      const lean = await run(argv, true);
      expect(lean).toEqual(await run(argv, false));
      expect(lean.out + lean.err).not.toBe("");
    }
  });
});
