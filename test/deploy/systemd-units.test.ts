/**
 * The systemd units in deploy/systemd: `systemd-analyze verify` accepts them,
 * and they keep the settings the operator docs rely on (user, restart policy,
 * graceful stop, sandbox that still reaches USB phones), consistent with the
 * example configs in deploy/config.
 *
 * verify refuses a unit whose ExecStart binary does not exist, and
 * /usr/bin/farm does not exist here: it runs on copies whose /usr/bin/farm is
 * replaced by an executable stand-in. verify exits 0 on unknown keys and
 * unparsable values (it only warns, naming the file), so a unit passes only
 * if verify exits 0 *and* prints nothing about it. Two deliberately broken
 * copies show that each of the two checks can fail.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const deployDir = fileURLToPath(new URL("../../deploy/", import.meta.url));
const AGENT = "farm-agent.service";
const COORDINATOR = "farm-coordinator.service";

type Unit = Map<string, Map<string, string[]>>;

/** Sections → keys → every assignment in order (systemd's syntax, no line continuations). */
function parseUnit(text: string): Unit {
  const unit: Unit = new Map();
  let section: Map<string, string[]> | undefined;
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    if (line.endsWith("\\")) throw new Error(`line ${i + 1}: continuation lines are not supported by this parser`);
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = new Map();
      unit.set(header[1]!, section);
      continue;
    }
    const eq = line.indexOf("=");
    if (!section || eq < 1) throw new Error(`line ${i + 1}: not a key=value line in a section: ${line}`);
    const key = line.slice(0, eq).trim();
    section.set(key, [...(section.get(key) ?? []), line.slice(eq + 1).trim()]);
  }
  return unit;
}

function readUnit(name: string): { text: string; unit: Unit } {
  const text = readFileSync(join(deployDir, "systemd", name), "utf8");
  return { text, unit: parseUnit(text) };
}

function values(unit: Unit, section: string, key: string): string[] {
  return unit.get(section)?.get(key) ?? [];
}

/** The effective value of a single-valued key: its last assignment. */
function last(unit: Unit, section: string, key: string): string | undefined {
  return values(unit, section, key).at(-1);
}

/** A list key's items, honouring systemd's "empty assignment resets the list". */
function list(unit: Unit, section: string, key: string): string[] {
  let items: string[] = [];
  for (const v of values(unit, section, key)) items = v === "" ? [] : [...items, ...v.split(/\s+/)];
  return items;
}

function readJson(path: string): Record<string, unknown> {
  return JSON.parse(readFileSync(join(deployDir, path), "utf8")) as Record<string, unknown>;
}

const hasAnalyze = spawnSync("systemd-analyze", ["--version"], { encoding: "utf8" }).error === undefined;
const analyzeMissing = "systemd-analyze is not installed: install the Debian package `systemd` (apt-get install systemd)";

let dir: string;
let shim: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "farm-units-"));
  shim = join(dir, "farm");
  writeFileSync(shim, "#!/bin/sh\nexit 0\n", { mode: 0o755 });
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Writes a copy of the unit (same file name, its own directory) with /usr/bin/farm replaced. */
function copyForVerify(name: string, edit: (text: string) => string = (t) => t): string {
  const original = readFileSync(join(deployDir, "systemd", name), "utf8");
  const sub = mkdtempSync(join(dir, "unit-"));
  const path = join(sub, name);
  writeFileSync(path, edit(original.replaceAll("/usr/bin/farm", shim)));
  return path;
}

/** verify's exit status, and every stderr line that mentions the unit. */
function verify(path: string): { status: number | null; problems: string[]; stderr: string } {
  const r = spawnSync("systemd-analyze", ["verify", "--man=no", path], { encoding: "utf8" });
  if (r.error) throw r.error;
  const name = path.slice(path.lastIndexOf("/") + 1);
  const problems = r.stderr.split("\n").filter((l) => l.includes(name));
  return { status: r.status, problems, stderr: r.stderr };
}

describe("systemd-analyze verify", () => {
  it("is installed", () => {
    expect(hasAnalyze, analyzeMissing).toBe(true);
  });

  it("uses a stand-in path verify can take unquoted", () => {
    expect(shim).toMatch(/^\/\S+$/);
  });

  for (const name of [AGENT, COORDINATOR]) {
    it(`accepts ${name} without a warning`, () => {
      expect(hasAnalyze, analyzeMissing).toBe(true);
      const path = copyForVerify(name);
      expect(readFileSync(path, "utf8")).not.toContain("/usr/bin/farm");
      const r = verify(path);
      expect(r.problems, r.stderr).toEqual([]);
      expect(r.status, r.stderr).toBe(0);
    });
  }

  it("reports a misspelt value and an unknown key (so the warning check can fail)", () => {
    expect(hasAnalyze, analyzeMissing).toBe(true);
    const path = copyForVerify(AGENT, (t) => t.replace("KillMode=process", "KillMode=proces\nKillModus=process"));
    const r = verify(path);
    expect(r.problems.some((l) => /kill mode/i.test(l)), r.stderr).toBe(true);
    expect(r.problems.some((l) => /Unknown key.*KillModus/.test(l)), r.stderr).toBe(true);
  });

  it("fails on a missing ExecStart binary (so the exit status check can fail)", () => {
    expect(hasAnalyze, analyzeMissing).toBe(true);
    const path = copyForVerify(COORDINATOR, (t) => t.replaceAll(shim, join(dir, "no-such-farm")));
    const r = verify(path);
    expect(r.status, r.stderr).not.toBe(0);
    expect(r.problems.join("\n")).toMatch(/no-such-farm/);
  });
});

describe("both units", () => {
  for (const name of [AGENT, COORDINATOR]) {
    describe(name, () => {
      const { unit } = readUnit(name);
      const svc = (key: string) => last(unit, "Service", key);

      it("run as farm:farm and restart on failure", () => {
        expect(svc("User")).toBe("farm");
        expect(svc("Group")).toBe("farm");
        expect(svc("Restart")).toBe("on-failure");
        expect(svc("RestartSec")).toBe("2s");
        expect(last(unit, "Install", "WantedBy")).toBe("multi-user.target");
      });

      it("log to journald at info", () => {
        expect(svc("StandardOutput")).toBe("journal");
        expect(svc("StandardError")).toBe("journal");
        expect(values(unit, "Service", "Environment")).toContain("FARM_LOG_LEVEL=info");
      });

      it("keep state in /var/lib/farm (0700) and read config from /etc/farm", () => {
        expect(svc("StateDirectoryMode")).toBe("0700");
        expect(svc("ConfigurationDirectory")).toBe("farm");
        expect(list(unit, "Service", "StateDirectory").every((d) => d.startsWith("farm/"))).toBe(true);
      });

      it("stop with SIGTERM", () => {
        expect(svc("KillSignal")).toBe("SIGTERM");
        expect(Number(svc("TimeoutStopSec"))).toBeGreaterThan(0);
      });

      it("are sandboxed, without breaking Node's JIT", () => {
        const yes = [
          "NoNewPrivileges",
          "ProtectHome",
          "PrivateTmp",
          "ProtectKernelTunables",
          "ProtectKernelModules",
          "ProtectControlGroups",
          "RestrictSUIDSGID",
          "LockPersonality",
          "RestrictRealtime",
          "RestrictNamespaces",
        ];
        for (const key of yes) expect(svc(key), key).toBe("yes");
        expect(svc("ProtectSystem")).toBe("strict");
        expect(svc("SystemCallArchitectures")).toBe("native");
        // Present and empty: no capabilities at all.
        expect(svc("CapabilityBoundingSet")).toBe("");
        expect(svc("AmbientCapabilities")).toBe("");
        expect(list(unit, "Service", "RestrictAddressFamilies")).toEqual(expect.arrayContaining(["AF_UNIX", "AF_INET", "AF_INET6"]));
        // W^X would crash Node at start.
        expect(values(unit, "Service", "MemoryDenyWriteExecute").filter((v) => v !== "no")).toEqual([]);
        // /proc/sys/kernel/random/boot_id identifies recording workers.
        expect(values(unit, "Service", "ProcSubset").filter((v) => v !== "all")).toEqual([]);
      });
    });
  }
});

describe(AGENT, () => {
  const { unit } = readUnit(AGENT);
  const svc = (key: string) => last(unit, "Service", key);
  const config = readJson("config/agent.json");

  it("runs `farm agent` with /etc/farm/agent.json", () => {
    expect(values(unit, "Service", "ExecStart")).toEqual(["/usr/bin/farm agent --config /etc/farm/agent.json"]);
  });

  it("stops gracefully and leaves recording workers running", () => {
    expect(svc("KillMode")).toBe("process");
    expect(Number(svc("TimeoutStopSec"))).toBe(60);
    // The drain must fit in the stop timeout, with room to shut down after it.
    expect(typeof config["drainTimeout"]).toBe("number");
    expect(config["drainTimeout"] as number).toBeLessThan(60);
  });

  it("can reach phones on USB", () => {
    expect(list(unit, "Service", "SupplementaryGroups")).toContain("plugdev");
    expect(values(unit, "Service", "PrivateDevices").filter((v) => v !== "no")).toEqual([]);
    expect(svc("DevicePolicy")).toBe("closed");
    expect(values(unit, "Service", "DeviceAllow")).toContain("char-usb_device rw");
    expect(list(unit, "Service", "RestrictAddressFamilies")).toContain("AF_NETLINK");
  });

  it("makes the example config's data and lock dirs writable and persistent", () => {
    const stateDirs = list(unit, "Service", "StateDirectory").map((d) => `/var/lib/${d}`);
    expect(stateDirs).toContain(config["dataDir"]);
    // Not under /tmp (private to the unit, deleted at stop) nor /run (deleted at stop).
    expect(stateDirs).toContain(config["lockDir"]);
    const home = values(unit, "Service", "Environment").find((e) => e.startsWith("HOME="))?.slice("HOME=".length);
    expect(stateDirs).toContain(home);
  });

  it("has an example config with exactly the documented keys", () => {
    expect(Object.keys(config).sort()).toEqual(
      ["coordinator", "dataDir", "tokenFile", "name", "adbHost", "adbPort", "adbStart", "heartbeatInterval", "lockDir", "caFile", "insecure", "metricsListen", "drainTimeout", "logLevel"].sort(),
    );
    expect(config["coordinator"]).toMatch(/^https:\/\//);
    expect(config["insecure"]).toBe(false);
    expect(String(config["tokenFile"])).toMatch(/^\/etc\/farm\//);
  });
});

describe(COORDINATOR, () => {
  const { unit } = readUnit(COORDINATOR);
  const svc = (key: string) => last(unit, "Service", key);
  const config = readJson("config/coordinator.json");

  it("runs `farm coordinator` with /etc/farm/coordinator.json", () => {
    expect(values(unit, "Service", "ExecStart")).toEqual(["/usr/bin/farm coordinator --config /etc/farm/coordinator.json"]);
  });

  it("starts Node with its default young generation, as the container image does (docs/performance.md, round 13)", () => {
    expect(values(unit, "Service", "Environment").some((e) => e.startsWith("NODE_OPTIONS="))).toBe(false);
    const entry = /^ENTRYPOINT (.*)$/m.exec(readFileSync(join(deployDir, "container/Dockerfile"), "utf8"))?.[1];
    expect(JSON.parse(entry ?? "[]")).toEqual(["node", "/opt/farm/cli/dist/main.js", "coordinator", "--config", "/etc/farm/coordinator.json"]);
  });

  it("reloads its certificate on SIGHUP", () => {
    expect(svc("ExecReload")).toBe("/bin/kill -HUP $MAINPID");
  });

  it("has no device access", () => {
    expect(svc("PrivateDevices")).toBe("yes");
  });

  it("makes the example config's data dir writable and persistent", () => {
    const stateDirs = list(unit, "Service", "StateDirectory").map((d) => `/var/lib/${d}`);
    expect(stateDirs).toEqual([config["dataDir"]]);
  });

  it("has an example config with exactly the documented keys, serving TLS", () => {
    expect(Object.keys(config).sort()).toEqual(["listen", "dataDir", "heartbeatMisses", "tlsCert", "tlsKey", "insecure", "logLevel"].sort());
    expect(config["insecure"]).toBe(false);
    expect(String(config["tlsCert"])).toMatch(/^\/etc\/farm\//);
    expect(String(config["tlsKey"])).toMatch(/^\/etc\/farm\//);
  });
});
