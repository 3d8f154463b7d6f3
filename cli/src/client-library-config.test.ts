import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { FarmError, resolveConnection } from "@farm/client";
import { main } from "./main.js";

/**
 * The client library's connect() resolves coordinator, token, CA and
 * insecure exactly as the CLI does: for each layout of environment, config
 * file and local standalone, what `farm config view` reports in effect (run
 * in process) is what resolveConnection gives, source names included.
 */
const dir = mkdtempSync(join(tmpdir(), "farm-client-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface View {
  effective: { coordinator: string; token: string | null; caFile: string | null; insecure: boolean };
  sources: { coordinator: string; token: string | null; caFile: string; insecure: string };
}

async function cliView(env: NodeJS.ProcessEnv): Promise<View> {
  let out = "";
  const code = await main(["config", "view", "-o", "json"], env, { out: (t) => (out += t), err: () => undefined });
  expect(code).toBe(0);
  return JSON.parse(out) as View;
}

function file(name: string, content: Record<string, unknown>): string {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(content), { mode: 0o600 });
  return path;
}

const home = join(dir, "standalone-home");
mkdirSync(home, { recursive: true });
writeFileSync(join(home, "standalone.json"), JSON.stringify({ url: "http://127.0.0.1:7" }));
writeFileSync(join(home, "admin.token"), "farmu_admin\n", { mode: 0o600 });
const tokenFile = join(dir, "user.token");
writeFileSync(tokenFile, "farmu_from_file\n", { mode: 0o600 });

const layouts: Record<string, NodeJS.ProcessEnv> = {
  nothing: { FARM_CONFIG: join(dir, "none.json"), FARM_HOME: join(dir, "empty") },
  "the local standalone": { FARM_CONFIG: join(dir, "none.json"), FARM_HOME: home },
  "the environment over the standalone": { FARM_CONFIG: join(dir, "none.json"), FARM_HOME: home, FARM_COORDINATOR: "http://127.0.0.1:9", FARM_TOKEN: "farmu_env", FARM_CA_FILE: "/etc/ca.pem", FARM_INSECURE: "1" },
  "the config file": { FARM_CONFIG: file("c1.json", { coordinator: "http://127.0.0.1:8", token: "farmu_cfg", caFile: "/etc/lab.pem", insecure: true }), FARM_HOME: home },
  "the config file's tokenFile": { FARM_CONFIG: file("c2.json", { coordinator: "http://127.0.0.1:8", tokenFile }), FARM_HOME: join(dir, "empty") },
  "the environment over the config file": { FARM_CONFIG: file("c3.json", { coordinator: "http://127.0.0.1:8", token: "farmu_cfg", insecure: true }), FARM_HOME: home, FARM_COORDINATOR: "http://127.0.0.1:9", FARM_TOKEN: "farmu_env" },
};

describe("@farm/client connect(): resolved as the CLI resolves", () => {
  for (const [name, env] of Object.entries(layouts)) {
    it(name, async () => {
      const view = await cliView(env);
      const lib = resolveConnection({ env });
      expect({ coordinator: lib.coordinator, token: lib.token === undefined ? null : "set", caFile: lib.caFile ?? null, insecure: lib.insecure }).toEqual({
        coordinator: view.effective.coordinator,
        token: view.effective.token,
        caFile: view.effective.caFile,
        insecure: view.effective.insecure,
      });
      expect({ coordinator: lib.coordinatorSource, token: lib.tokenSource ?? null, caFile: lib.caFileSource, insecure: lib.insecureSource }).toEqual({
        coordinator: view.sources.coordinator,
        token: view.sources.token,
        caFile: view.sources.caFile,
        insecure: view.sources.insecure,
      });
    });
  }

  it("its own options stand where the CLI's flags do, above the environment", () => {
    const env = layouts["the environment over the config file"] as NodeJS.ProcessEnv;
    const lib = resolveConnection({ env, coordinator: "http://127.0.0.1:5", tokenFile, insecure: false });
    expect(lib).toMatchObject({ coordinator: "http://127.0.0.1:5", token: "farmu_from_file", tokenSource: `--token-file ${tokenFile}`, insecure: false });
    expect(resolveConnection({ env, token: "farmu_given" })).toMatchObject({ token: "farmu_given", tokenSource: "the token option" });
  });

  it("bad settings are a FarmError naming the setting, before anything is dialled", () => {
    const bad = (f: () => unknown) => {
      try {
        f();
      } catch (err) {
        expect(err).toBeInstanceOf(FarmError);
        return err as FarmError;
      }
      throw new Error("no error");
    };
    expect(bad(() => resolveConnection({ env: layouts["nothing"], coordinator: "ftp://x" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "coordinator" });
    expect(bad(() => resolveConnection({ env: { ...layouts["nothing"], FARM_CONFIG: file("bad.json", { insecure: "yes" }) } }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "insecure" });
    expect(bad(() => resolveConnection({ env: layouts["nothing"], tokenFile: join(dir, "no.token") }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "token-file" });
  });
});
