/**
 * `make pack`'s client tarball (scripts/pack-client.mjs) is a library a
 * test project installs on its own: into an empty directory, with no
 * registry and an empty npm cache (`npm install --offline` of the tarball
 * beside its three dependencies, themselves packed from this checkout's
 * node_modules), it type-checks a TypeScript consumer (an `await using`
 * lease, a tap by element; a wrong call is a type error), and the compiled
 * consumer leases a real lab's phone, runs a shell and takes a screenshot,
 * the lease released when its scope ends.
 */
import { execFile } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { farm } from "../support/farm-process.js";
import { repoRoot } from "../support/installed-cli.js";
import { startLab, type Lab } from "../support/lab.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";

let dir: TempDir;
let lab: Lab;
let serial: string;

beforeAll(async () => {
  dir = await makeTempDir("pack-client");
  lab = await startLab("pack-client-lab");
  ({ serial } = await lab.addDevice({ serialno: "PACK0001" }));
}, 120_000);

afterAll(async () => {
  await lab?.stop();
  await dir?.remove();
});

/** Runs a command to its end without blocking this process: the simulated phone answers from here. */
function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, env, encoding: "utf8", timeout: 240_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(" ")} failed (${String(err.code ?? err.signal)}):\n${stdout}${stderr}`));
      else resolve({ stdout, stderr });
    });
  });
}

const CONSUMER = `import { connect, FarmError, type Lease } from "@farm/client";

/** A harness's run: one connection, a lease for the scope, a shell and a screenshot. */
async function main(serial: string): Promise<void> {
  await using client = await connect();
  let released = false;
  {
    await using lease = await client.acquire({ serial, waitMs: 10_000 });
    const shell = await lease.device.shell("getprop ro.serialno");
    const shot = await lease.device.screenshot();
    process.stdout.write(JSON.stringify({ leaseId: lease.leaseId, stdout: shell.stdout, png: shot.png.subarray(0, 8).toString("hex"), width: shot.width, sha256: shot.sha256 }) + "\\n");
    released = lease.released;
  }
  try {
    await client.acquire({ model: "NoSuchPhone" });
  } catch (err) {
    if (err instanceof FarmError) process.stdout.write(JSON.stringify({ code: err.code, exitCode: err.exitCode, releasedInScope: released }) + "\\n");
  }
}

export async function wrong(lease: Lease): Promise<void> {
  // @ts-expect-error a tap names a point or an element, not a bare string
  await lease.device.tap("Next");
}

await main(process.argv[2] ?? "");
`;

describe("the packed client library", () => {
  it("installs from its tarball into an empty directory offline, type-checks a consumer, and drives a real lab", async () => {
    const bundle = join(dir.path, "bundle");
    const tarball = (await run(process.execPath, [join(repoRoot, "scripts/pack-client.mjs"), "--out", bundle, "--quiet"], dir.path)).stdout.trim().split("\n").pop() as string;
    expect(tarball).toMatch(/farm-client-[\d.]+\.tgz$/);
    const shipped = JSON.parse(readFileSync(join(bundle, "package/package.json"), "utf8")) as { dependencies: Record<string, string> };
    // No workspace package is a dependency: the workspace code is in the bundle.
    expect(Object.keys(shipped.dependencies).filter((d) => d.startsWith("@farm/"))).toEqual([]);

    // Its dependencies as tarballs from this checkout's node_modules, at the versions it pins.
    const deps = join(dir.path, "deps");
    mkdirSync(deps);
    for (const [name, version] of Object.entries(shipped.dependencies)) {
      const installed = JSON.parse(readFileSync(join(repoRoot, "node_modules", name, "package.json"), "utf8")) as { version: string };
      expect(installed.version, name).toBe(version);
      await run("npm", ["pack", "--silent", "--pack-destination", deps, join(repoRoot, "node_modules", name)], dir.path);
    }

    const app = join(dir.path, "app");
    mkdirSync(app);
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "harness", private: true, type: "module" }));
    // No registry, and a cache of its own that starts empty: whatever is installed came from these tarballs.
    const npmEnv = { ...process.env, npm_config_cache: join(dir.path, "npm-cache"), npm_config_registry: "http://127.0.0.1:9/" };
    await run("npm", ["install", "--offline", "--no-audit", "--no-fund", "--no-save", ...readdirSync(deps).map((f) => `./${join("..", "deps", f)}`), tarball], app, npmEnv);
    expect(readdirSync(join(app, "node_modules/@farm"))).toEqual(["client"]);

    writeFileSync(join(app, "harness.ts"), CONSUMER);
    const tsc = join(repoRoot, "node_modules/typescript/bin/tsc");
    await run(
      process.execPath,
      [
        tsc,
        "--strict",
        "--skipLibCheck",
        "--module",
        "nodenext",
        "--moduleResolution",
        "nodenext",
        "--target",
        "es2022",
        "--lib",
        "es2023,esnext.disposable",
        "--types",
        "node",
        "--typeRoots",
        join(repoRoot, "node_modules/@types"),
        "--outDir",
        "out",
        "harness.ts",
      ],
      app,
    );

    const ran = await run(process.execPath, [join(app, "out/harness.js"), serial], app, { PATH: process.env["PATH"], HOME: dir.path, ...lab.env });
    const [leased, refused] = ran.stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(leased).toMatchObject({ stdout: "PACK0001\n", png: "89504e470d0a1a0a" });
    expect(Number(leased?.["width"])).toBeGreaterThan(0);
    expect(refused).toEqual({ code: "NO_DEVICE_MATCHES", exitCode: expect.any(Number), releasedInScope: false });
    const list = await farm(["lease", "list"], lab.env);
    expect(list.json["leases"]).toEqual([]);
  }, 300_000);
});
