/**
 * `make install`: the bundled CLI (scripts/bundle-cli.mjs) installed under a
 * prefix (scripts/install-cli.mjs, what the Makefile target runs) is a
 * working `farm` on PATH, and runs the services from the install alone: its
 * SQLite migrations, native modules, dashboard and video worker are found
 * inside PREFIX/lib/farm, not in this checkout.
 */
import { spawnSync } from "node:child_process";
import { existsSync, lstatSync, readdirSync, readlinkSync, rmSync, statSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { FARM_VERSION } from "@farm/shared/version";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, SimDevice, startAdbServer, type AdbServer } from "../devsim/index.js";
import { installCli, repoRoot, runFarm, startInstalledFarm, type InstalledCli, type Service } from "../support/installed-cli.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";
import { waitFor } from "../support/farm-process.js";

let dir: TempDir;
let cli: InstalledCli;

beforeAll(async () => {
  dir = await makeTempDir("install");
  cli = installCli(dir.path);
});

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

describe("make install", () => {
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

  it("is self-contained: no links back into the checkout, natives built, sources left out", () => {
    const home = join(cli.prefix, "lib", "farm");
    expect(symlinksUnder(home)).toEqual([]);
    expect(lstatSync(cli.bin).isSymbolicLink()).toBe(true);
    expect(statSync(join(home, "lib", "farm.cjs")).mode & 0o111).not.toBe(0);
    for (const f of ["assets/agent-drizzle/meta/_journal.json", "assets/coordinator-drizzle/meta/_journal.json", "assets/dashboard/index.html", "lib/worker-main.js"]) {
      expect(existsSync(join(home, f)), f).toBe(true);
    }
    expect(existsSync(join(home, "node_modules/better-sqlite3/build/Release/better_sqlite3.node"))).toBe(true);
    expect(existsSync(join(home, "node_modules/better-sqlite3/deps"))).toBe(false);
    expect(existsSync(join(home, "node_modules/node-pty/build/Release/pty.node"))).toBe(true);
    // Bundled code is not installed as packages, natives are.
    expect(readdirSync(join(home, "node_modules"))).not.toContain("@connectrpc");
    expect(readdirSync(join(home, "node_modules"))).toContain("sharp");
    // The worker the agent forks runs on its own.
    const worker = spawnSync(process.execPath, [join(home, "lib", "worker-main.js")], { encoding: "utf8" });
    expect(worker.status).toBe(2);
    expect(worker.stderr).toContain("usage: worker-main.js SESSION_DIR");
  });

  describe("farm standalone from the install", () => {
    let adb: AdbServer;
    let phone: SimDevice;
    let standalone: Service;
    let env: NodeJS.ProcessEnv;
    let serial: string;
    let animation: NodeJS.Timeout;

    beforeAll(async () => {
      adb = await startAdbServer();
      const home = join(dir.path, "home");
      // Run from a directory outside the checkout, with nothing from it on NODE_PATH.
      env = { ...cli.env, FARM_HOME: home, XDG_STATE_HOME: join(home, "state"), FARM_CONFIG: join(dir.path, "none.json"), FARM_COORDINATOR: "", FARM_TOKEN: "", FARM_OUTPUT: "json", NODE_PATH: "" };
      standalone = await startInstalledFarm(
        ["standalone", "--listen", "127.0.0.1:0", "--adb-port", String(adb.port), "--lock-dir", join(dir.path, "locks"), "--no-adb-start", "--heartbeat-interval", "500"],
        env,
      );
      phone = new SimDevice({ serialno: "INSTALL0001" });
      serial = await adbConnect(adb.port, "127.0.0.1", await phone.listen());
      // screenrecord writes frames only when the screen changes.
      animation = setInterval(() => phone.state.screen.changed(), 50);
    });

    afterAll(async () => {
      clearInterval(animation);
      await standalone?.stop();
      await phone?.close();
      await adb?.stop();
    });

    it("lists the phone, runs a shell command, takes a screenshot, serves the dashboard, records video", async () => {
      await waitFor(`${serial} in farm devices`, async () => {
        const list = ((await runFarm(["devices"], env)).json["devices"] ?? []) as { serial: string; state: string }[];
        return list.some((d) => d.serial === serial && d.state === "device") ? true : undefined;
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

      const url = String(standalone.ready["url"]);
      const page = await fetch(`${url}/dashboard/`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain("<html");

      // The agent forks lib/worker-main.js for each recording.
      const bundle = join(dir.path, "video");
      const started = await runFarm(["evidence", "video", "start", "--device", serial, "--duration-seconds", "30", "--size", "216x480", "--output-dir", bundle], leased);
      expect(started.json, started.stdout + started.stderr).toMatchObject({ ok: true, status: "recording", workerAvailable: true });
      await new Promise((r) => setTimeout(r, 1_500));
      const stopped = await runFarm(["evidence", "video", "stop", "--session", join(bundle, "manifest.json")], leased);
      expect(stopped.json, stopped.stdout + stopped.stderr).toMatchObject({ ok: true, status: "complete", stored: true });
      expect(statSync(join(bundle, "video.mp4")).size).toBeGreaterThan(0);
    });
  });

  it("updates an install whose link is the old entry (lib/main.js) to lib/farm.cjs", async () => {
    rmSync(cli.bin);
    symlinkSync("../lib/farm/lib/main.js", cli.bin);
    const r = spawnSync(process.execPath, [join(repoRoot, "scripts", "install-cli.mjs"), "--from", join(dir.path, "package"), "--prefix", cli.prefix, "--quiet"], { encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
    expect(readlinkSync(cli.bin)).toBe("../lib/farm/lib/farm.cjs");
    expect((await runFarm(["--version"], { ...cli.env, FARM_OUTPUT: "json" })).json).toEqual({ ok: true, version: FARM_VERSION });
  });

  it("uninstalls what it installed", () => {
    const r = spawnSync(process.execPath, [join(repoRoot, "scripts", "install-cli.mjs"), "--prefix", cli.prefix, "--uninstall", "--quiet"], { encoding: "utf8" });
    expect(r.status, r.stderr).toBe(0);
    expect(existsSync(cli.bin)).toBe(false);
    expect(existsSync(join(cli.prefix, "lib", "farm"))).toBe(false);
  });
});
