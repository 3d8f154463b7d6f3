/**
 * The one install story (docs/operations/install.md): `make pack` writes
 * farm-cli-VERSION.tgz (scripts/bundle-cli.mjs, scripts/pack-cli.mjs) and a
 * lab host runs `npm install -g farm-cli-VERSION.tgz`. Here the tarball goes
 * into an EMPTY prefix with `npm install -g --offline` and an empty npm cache
 * (test/support/installed-cli.ts), so nothing can come from the network, the
 * machine's cache or this checkout: the natives ride inside the tarball. From
 * that prefix alone, `farm` answers --version, and a coordinator and an agent
 * serve a simulated phone that is leased, driven, screenshotted and recorded.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, lstatSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FARM_VERSION } from "@farm/shared/version";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, SimDevice, startAdbServer, type AdbServer } from "../devsim/index.js";
import { repoRoot, runFarm, startInstalledFarm, type InstalledCli, type Service } from "../support/installed-cli.js";
import { installPackedCli } from "../support/packed-cli.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";
import { HEARTBEAT_INTERVAL } from "../support/heartbeat.js";
import { runCli, waitFor } from "../support/farm-process.js";

let dir: TempDir;
let cli: InstalledCli;

// Bundling, packing (~40 MB gzipped; once per run, shared with cli-exits) and npm install take a minute or two on a loaded machine.
beforeAll(async () => {
  dir = await makeTempDir("install");
  cli = await installPackedCli(dir.path);
}, 300_000);

afterAll(async () => {
  await dir?.remove();
});

/** Every path under `root` that is a symlink. */
function symlinksUnder(root: string): string[] {
  const found: string[] = [];
  for (const name of readdirSync(root, { recursive: true }) as string[]) {
    if (lstatSync(join(root, name)).isSymbolicLink()) found.push(name);
  }
  return found;
}

describe("npm install -g farm-cli-VERSION.tgz into an empty prefix", () => {
  it("puts farm on PATH: --version, --help, standalone --help", async () => {
    const which = spawnSync("sh", ["-c", "command -v farm"], { env: cli.env, encoding: "utf8" });
    expect(which.stdout.trim()).toBe(cli.bin);

    const version = await runFarm(["--version"], { ...cli.env, FARM_OUTPUT: "json" });
    expect(version.code).toBe(0);
    expect(version.json).toEqual({ ok: true, version: FARM_VERSION });
    const pretty = await runFarm(["--version", "--output", "pretty"], cli.env);
    expect(pretty.stdout.trim()).toBe(`farm ${FARM_VERSION}`);
    // With a coordinator to ask, the entry (lib/farm.cjs) leaves --version to the CLI, which asks it.
    const asked = await runFarm(["--version"], { ...cli.env, FARM_OUTPUT: "json", FARM_COORDINATOR: "http://127.0.0.1:1" });
    expect(asked.json).toEqual({ ok: true, version: FARM_VERSION, coordinator: { url: "http://127.0.0.1:1", version: "unreachable" } });

    const help = await runFarm(["--help"], cli.env);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("Usage: farm <command> [flags]");
    expect(help.stdout).toMatch(/^ {2}standalone /m);
    const standalone = await runFarm(["standalone", "--help"], cli.env);
    expect(standalone.code).toBe(0);
    expect(standalone.stdout).toContain("Usage: farm standalone");
    expect(standalone.stdout).toContain("--listen");
  });

  it("carries what it needs: natives built, sources left out, deploy files, no npm dependencies", () => {
    const home = cli.home;
    expect(readdirSync(cli.prefix).sort()).toEqual(["bin", "lib"]);
    expect(readdirSync(join(cli.prefix, "lib", "node_modules"))).toEqual(["@farm"]);
    expect(symlinksUnder(home)).toEqual([]);
    expect(statSync(join(home, "lib", "farm.cjs")).mode & 0o111).not.toBe(0);
    const pkg = JSON.parse(readFileSync(join(home, "package.json"), "utf8")) as Record<string, unknown>;
    // Nothing for npm to fetch or build on the host; and npm refuses it on another platform.
    expect(pkg["dependencies"]).toBeUndefined();
    expect(pkg).toMatchObject({ name: "@farm/cli", version: FARM_VERSION, os: [process.platform], cpu: [process.arch] });
    expect((pkg["engines"] as { node: string }).node).toMatch(new RegExp(`<${Number(process.versions.node.split(".")[0]) + 1}$`));
    for (const f of ["assets/agent-drizzle/meta/_journal.json", "assets/coordinator-drizzle/meta/_journal.json", "assets/dashboard/index.html", "lib/worker-main.js"]) {
      expect(existsSync(join(home, f)), f).toBe(true);
    }
    const natives = join(home, "lib", "node_modules");
    expect(existsSync(join(natives, "better-sqlite3/build/Release/better_sqlite3.node"))).toBe(true);
    expect(existsSync(join(natives, "better-sqlite3/deps"))).toBe(false);
    expect(existsSync(join(natives, "node-pty/build/Release/pty.node"))).toBe(true);
    // Bundled code is not installed as packages, natives are.
    expect(readdirSync(natives)).not.toContain("@connectrpc");
    expect(readdirSync(natives)).toContain("sharp");
    // The systemd units, udev rule and example configs the install guide copies from the package.
    for (const f of ["systemd/farm-agent.service", "systemd/farm-coordinator.service", "udev/51-farm-android.rules", "config/agent.json", "config/coordinator.json"]) {
      expect(readFileSync(join(home, "deploy", f), "utf8"), f).toBe(readFileSync(join(repoRoot, "deploy", f), "utf8"));
    }
    // The worker the agent forks runs on its own.
    const worker = spawnSync(process.execPath, [join(home, "lib", "worker-main.js")], { encoding: "utf8" });
    expect(worker.status).toBe(2);
    expect(worker.stderr).toContain("usage: worker-main.js SESSION_DIR");
  });

  describe("a coordinator and an agent from the install", () => {
    let adb: AdbServer;
    let phone: SimDevice;
    let coordinator: Service;
    let agent: Service;
    let env: NodeJS.ProcessEnv;
    let serial: string;
    let animation: NodeJS.Timeout;

    beforeAll(async () => {
      adb = await startAdbServer();
      const home = join(dir.path, "home");
      const data = join(dir.path, "coordinator");
      // Nothing from the checkout on NODE_PATH; no configured coordinator to fall back on.
      const base = { ...cli.env, FARM_HOME: home, XDG_STATE_HOME: join(home, "state"), FARM_CONFIG: join(dir.path, "none.json"), FARM_COORDINATOR: "", FARM_TOKEN: "", FARM_OUTPUT: "json", NODE_PATH: "" };
      coordinator = await startInstalledFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", data], base);
      const url = String(coordinator.ready["url"]);
      const admin = { ...base, FARM_COORDINATOR: url, FARM_TOKEN: readFileSync(join(data, "admin.token"), "utf8").trim() };
      const agentToken = await runFarm(["token", "create", "--kind", "agent", "--name", "lab-1"], admin);
      expect(agentToken.code, agentToken.stdout + agentToken.stderr).toBe(0);
      const tokenFile = join(dir.path, "agent.token");
      writeFileSync(tokenFile, String(agentToken.json["token"]), { mode: 0o600 });
      agent = await startInstalledFarm(
        [
          "agent",
          "run",
          "--coordinator",
          url,
          "--name",
          "lab-1",
          "--token-file",
          tokenFile,
          "--data-dir",
          join(dir.path, "agent"),
          "--adb-port",
          String(adb.port),
          "--no-adb-start",
          "--lock-dir",
          join(dir.path, "locks"),
          "--heartbeat-interval",
          HEARTBEAT_INTERVAL,
        ],
        base,
      );
      const user = await runFarm(["token", "create", "--kind", "user", "--name", "ci"], admin);
      expect(user.code, user.stdout + user.stderr).toBe(0);
      env = { ...admin, FARM_TOKEN: String(user.json["token"]) };
      phone = new SimDevice({ serialno: "INSTALL0001" });
      serial = await adbConnect(adb.port, "127.0.0.1", await phone.listen());
      // screenrecord writes frames only when the screen changes.
      animation = setInterval(() => phone.state.screen.changed(), 50);
    });

    afterAll(async () => {
      clearInterval(animation);
      await agent?.stop();
      await coordinator?.stop();
      await phone?.close();
      await adb?.stop();
    });

    it("leases the phone, runs a shell command, takes a screenshot, serves the dashboard, records video", async () => {
      await waitFor(`${serial} in farm devices`, async () => {
        const list = ((await runFarm(["devices"], env)).json["devices"] ?? []) as { serial: string; state: string; agentName: string }[];
        return list.some((d) => d.serial === serial && d.state === "device" && d.agentName === "lab-1") ? true : undefined;
      });

      const lease = await runFarm(["lease", "acquire", "--device", serial], env);
      expect(lease.code, lease.stdout + lease.stderr).toBe(0);
      const leased = { ...env, FARM_LEASE: (lease.json["lease"] as { token: string }).token };
      const shell = await runFarm(["shell", "--device", serial, "--", "true"], leased);
      expect(shell.code, shell.stdout + shell.stderr).toBe(0);

      // sharp checks the PNG on the agent.
      const png = join(dir.path, "shot.png");
      const shot = await runFarm(["screenshot", "--device", serial, "--output", png], leased);
      expect(shot.code, shot.stdout + shot.stderr).toBe(0);
      expect(statSync(png).size).toBeGreaterThan(0);

      const url = String(coordinator.ready["url"]);
      const page = await fetch(`${url}/dashboard/`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain("<html");

      // The agent forks lib/worker-main.js for each recording.
      const bundle = join(dir.path, "video");
      const started = await runFarm(["evidence", "video", "start", "--device", serial, "--duration-seconds", "30", "--size", "216x480", "--output-dir", bundle], leased);
      expect(started.json, started.stdout + started.stderr).toMatchObject({ ok: true, status: "recording", workerAvailable: true });
      await new Promise((r) => setTimeout(r, 1_500));
      const stopped = await runFarm(["evidence", "video", "stop", "--recording", join(bundle, "manifest.json")], leased);
      expect(stopped.json, stopped.stdout + stopped.stderr).toMatchObject({ ok: true, status: "complete", stored: true });
      expect(statSync(join(bundle, "video.mp4")).size).toBeGreaterThan(0);
      // The phone goes back to the pool for the next test.
      const released = await runFarm(["lease", "release"], leased);
      expect(released.code, released.stdout + released.stderr).toBe(0);
    });

    // 24 runs of the installed farm: half a minute quiet, minutes at load 25.
    it("answers farm shell and farm devices through one request as the full client path does, refusals included", async () => {
      const lease = await runFarm(["lease", "acquire", "--device", serial], env);
      expect(lease.code, lease.stdout + lease.stderr).toBe(0);
      const leased = { ...env, FARM_LEASE: (lease.json["lease"] as { token: string }).token };
      // Counts fetch Headers made (Connect makes some for every call, the one-request path none) and names the bundles compiled through vm.Script.
      const probe = join(dir.path, "headers-probe.cjs");
      writeFileSync(
        probe,
        [
          "const H = globalThis.Headers; let n = 0; globalThis.Headers = class extends H { constructor(...a) { super(...a); n++; } };",
          "const vm = require('node:vm'); const S = vm.Script; const seen = [];",
          "vm.Script = class extends S { constructor(code, opts) { super(code, opts); seen.push(require('node:path').basename(opts.filename)); } };",
          "process.once('exit', () => process.stderr.write('headers-probe ' + n + ' ' + seen.join(',') + '\\n'));",
          "",
        ].join("\n"),
      );
      const made = (stderr: string) => Number(/^headers-probe (\d+) /m.exec(stderr)?.[1] ?? Number.NaN);
      const bundles = (stderr: string) => /^headers-probe \d+ (.*)$/m.exec(stderr)?.[1];
      // Ids and times differ from run to run (a table's "13s ago", and so its column widths, too); nothing else may.
      const varying: [RegExp, string][] = [
        [/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<uuid>"],
        [/"actionId":"[^"]*"/g, "\"actionId\":\"<id>\""],
        [/action [0-9A-Za-z_-]+/g, "action <id>"],
        [/\b\d+ ms\b/g, "<n> ms"],
        [/^headers-probe \d+ .*\n/m, ""],
        [/\b\d+[smhd] ago\b/g, "<t> ago"],
        [/ +/g, " "],
      ];
      const same = (s: string) => varying.reduce((text, [re, by]) => text.replace(re, by), s);
      // "plain": read by the one-request path itself; "replayed": its answer judged by the full client code; "full": the full path from the start.
      const cases: [string, string[], NodeJS.ProcessEnv, "plain" | "replayed" | "full"][] = [
        ["devices", ["devices"], env, "plain"],
        ["devices, wide table", ["devices", "--output", "wide"], env, "plain"],
        ["shell", ["shell", "--device", serial, "--", "echo", "hi"], leased, "plain"],
        ["shell, exit 3 and stderr, pretty", ["shell", "--device", serial, "--output", "pretty", "--", "echo out; echo err >&2; exit 3"], leased, "plain"],
        ["shell --verbose", ["shell", "--device", serial, "--verbose", "--", "true"], leased, "plain"],
        ["shell without the lease (refused)", ["shell", "--device", serial, "--", "true"], env, "replayed"],
        ["shell with another lease token (refused)", ["shell", "--device", serial, "--", "true"], { ...env, FARM_LEASE: "not-a-lease" }, "replayed"],
        ["shell on an unknown device", ["shell", "--device", "NO-SUCH-PHONE", "--", "true"], leased, "replayed"],
        ["shell with a bad token", ["shell", "--device", serial, "--", "true"], { ...leased, FARM_TOKEN: "not-a-token" }, "replayed"],
        ["devices with a bad token", ["devices"], { ...env, FARM_TOKEN: "not-a-token" }, "full"],
        ["shell, coordinator unreachable", ["shell", "--device", serial, "--", "true"], { ...leased, FARM_COORDINATOR: "http://127.0.0.1:1" }, "full"],
        ["devices, coordinator unreachable", ["devices"], { ...env, FARM_COORDINATOR: "http://127.0.0.1:1" }, "full"],
      ];
      for (const [name, args, e, path] of cases) {
        const probed = { ...e, NODE_OPTIONS: `--require ${probe}` };
        const one = await runFarm(args, probed);
        const full = await runFarm(args, { ...probed, FARM_ONE_CALL: "0" });
        expect({ code: one.code, out: same(one.stdout), err: same(one.stderr) }, name).toEqual({ code: full.code, out: same(full.stdout), err: same(full.stderr) });
        expect(made(full.stderr), name).toBeGreaterThan(0);
        // A plain answer makes no Headers; a refusal is judged by the full client code (one-call-replay.ts), which does.
        if (path === "plain") expect(made(one.stderr), name).toBe(0);
        else expect(made(one.stderr), name).toBeGreaterThan(0);
        // A plain answer runs lib/one.cjs alone; anything else is handed to lib/hot.cjs, which judges the call already made.
        expect(bundles(one.stderr), name).toBe(path === "plain" ? "one.cjs" : "one.cjs,hot.cjs");
        expect(bundles(full.stderr), name).toBe("one.cjs,hot.cjs");
      }
      const released = await runFarm(["lease", "release"], leased);
      expect(released.code, released.stdout + released.stderr).toBe(0);
    }, 300_000);

    it("farm shell stopped by SIGTERM during lib/one.cjs's request: handed to lib/hot.cjs with the signal, exit 143 as the full path's", async () => {
      const lease = await runFarm(["lease", "acquire", "--device", serial], env);
      expect(lease.code, lease.stdout + lease.stderr).toBe(0);
      const leased = { ...env, FARM_LEASE: (lease.json["lease"] as { token: string }).token, FARM_DEVICE: serial };
      try {
        const shell = spawn(cli.bin, ["shell", "--timeout", "600000", "--", "sleep", "600"], { env: leased, stdio: ["ignore", "pipe", "pipe"] });
        let out = "";
        shell.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
        const exited = new Promise<number | null>((resolve) => shell.once("exit", (code) => resolve(code)));
        try {
          // Running on the phone: the plain runner's call is in flight.
          await waitFor("the sleep on the phone", async () => {
            const s = await runFarm(["device", "ownership", "status", "--device", serial], env);
            return JSON.stringify(s.json["ownership"]).includes("sleep 600") ? true : undefined;
          }, { timeoutMs: 60_000 });
          shell.kill("SIGTERM");
          expect(await exited).toBe(143);
        } finally {
          if (shell.exitCode === null) shell.kill("SIGKILL");
        }
        // Sent before the signal: the envelope says the outcome is unknown, as the full path's cancel does (e2e cli-signals).
        expect(JSON.parse(out.trim())).toMatchObject({ ok: false, code: "CALL_CANCELLED", dispatched: null, ambiguous: true });
      } finally {
        await runFarm(["lease", "release"], leased);
      }
    }, 180_000);
  });

  describe("the hot commands (farm shell, devices, screenshot, input)", () => {
    /** Preloaded into `farm`: which scripts were compiled through vm.Script, with a code cache or not, and whether V8 took it. */
    const probe = () => {
      const file = join(dir.path, "vm-probe.cjs");
      writeFileSync(
        file,
        [
          "const vm = require('node:vm');",
          "const Script = vm.Script;",
          "const seen = [];",
          "vm.Script = class extends Script { constructor(code, opts) { super(code, opts); seen.push({ file: opts && opts.filename, cached: opts !== undefined && opts.cachedData !== undefined, rejected: this.cachedDataRejected === true }); } };",
          "process.once('exit', () => process.stderr.write('vm-probe ' + JSON.stringify(seen) + '\\n'));",
        ].join("\n"),
      );
      return file;
    };
    const compiled = (stderr: string) => JSON.parse(/^vm-probe (.*)$/m.exec(stderr)?.[1] ?? "null") as { file: string; cached: boolean; rejected: boolean }[] | null;

    it("run from lib/one.cjs and lib/hot.cjs, compiled from the code caches shipped beside them, and answer as lib/main.js does", async () => {
      const lib = join(cli.home, "lib");
      expect(existsSync(join(lib, "hot.cjs.cache"))).toBe(true);
      expect(existsSync(join(lib, "one.cjs.cache"))).toBe(true);
      const env = { ...cli.env, FARM_HOME: join(dir.path, "hot-home"), FARM_CONFIG: join(dir.path, "none.json"), FARM_COORDINATOR: "http://127.0.0.1:1", FARM_TOKEN: "t", FARM_OUTPUT: "json", NODE_PATH: "" };
      const probed = { ...env, NODE_OPTIONS: `--require ${probe()}` };
      const hot = await runFarm(["devices"], probed);
      expect(hot.json, hot.stdout + hot.stderr).toMatchObject({ ok: false, code: "COORDINATOR_UNAVAILABLE" });
      // The plain runner first (nothing could be sent), then the hot bundle, each from its own code cache.
      expect(compiled(hot.stderr)).toEqual([{ file: join(lib, "one.cjs"), cached: true, rejected: false }, { file: join(lib, "hot.cjs"), cached: true, rejected: false }]);
      // Anything else is left to lib/main.js (ES modules): nothing compiled through vm.
      const other = await runFarm(["lease", "list"], probed);
      expect(other.json, other.stdout + other.stderr).toMatchObject({ ok: false, code: "COORDINATOR_UNAVAILABLE" });
      expect(compiled(other.stderr)).toEqual([]);
      // The same command lines through lib/main.js: the same output and exit code.
      for (const args of [["devices"], ["devices", "--wide"], ["shell", "--device", "X", "--", "true"], ["shell", "--timeout", "0", "--", "true"], ["screenshot", "--device", "X"], ["input", "--device", "X", "tap", "1", "2"]]) {
        const viaHot = await runFarm(args, env);
        const viaMain = await runCli(process.execPath, [join(lib, "main.js"), ...args], env);
        expect({ code: viaHot.code, out: viaHot.stdout, err: viaHot.stderr }, args.join(" ")).toEqual({ code: viaMain.code, out: viaMain.stdout, err: viaMain.stderr });
      }
    });
  });

  it("npm uninstall -g removes it (make uninstall)", () => {
    const r = spawnSync("npm", ["uninstall", "-g", "--no-audit", "--no-fund", "--prefix", cli.prefix, "@farm/cli"], { encoding: "utf8", cwd: dir.path });
    expect(r.status, r.stderr).toBe(0);
    expect(existsSync(cli.bin)).toBe(false);
    expect(existsSync(cli.home)).toBe(false);
  });
});
