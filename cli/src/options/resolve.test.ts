import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CliError } from "../cli-error.js";
import { flag, list, parsedWithDefault, requiredText, text } from "./option-decl.js";
import { intIn } from "./parsers.js";
import { pick, resolveClientConfig, resolveOption, resolveOptions, type Layers } from "./resolve.js";

const timeout = parsedWithDefault("--timeout <ms>", "deadline", intIn(100, 60_000), 30_000, { env: "FARM_TIMEOUT_TEST", config: "timeout" });
const layers = (over: Partial<Layers> = {}): Layers => ({ flags: {}, env: {}, file: {}, ...over });

describe("flag > environment > config file > default", () => {
  it("takes each layer only when the ones above it are silent", () => {
    const all = layers({ flags: { timeout: "1000" }, env: { FARM_TIMEOUT_TEST: "2000" }, file: { timeout: 3000 } });
    expect(resolveOption(timeout, "timeout", all)).toEqual({ value: 1000, source: "flag" });
    expect(resolveOption(timeout, "timeout", { ...all, flags: {} })).toEqual({ value: 2000, source: "env" });
    expect(resolveOption(timeout, "timeout", { ...all, flags: {}, env: {} })).toEqual({ value: 3000, source: "config" });
    expect(resolveOption(timeout, "timeout", layers())).toEqual({ value: 30_000, source: "default" });
  });

  it("treats an empty environment variable as unset", () => {
    expect(resolveOption(timeout, "timeout", layers({ env: { FARM_TIMEOUT_TEST: "" }, file: { timeout: "500" } }))).toEqual({ value: 500, source: "config" });
  });

  it("parses every layer with the flag's parser, naming the flag when it refuses", () => {
    for (const l of [layers({ flags: { timeout: "x" } }), layers({ env: { FARM_TIMEOUT_TEST: "5" } }), layers({ file: { timeout: 9_999_999 } })]) {
      expect(() => resolveOption(timeout, "timeout", l)).toThrow(CliError);
      try {
        resolveOption(timeout, "timeout", l);
      } catch (err) {
        expect(err).toMatchObject({ code: "INVALID_ARGUMENT", field: "timeout" });
      }
    }
    expect(() => resolveOption(timeout, "timeout", layers({ file: { timeout: true } }))).toThrow(/wrong type for --timeout/);
  });

  it("refuses a required option that nothing sets, and names its variable", () => {
    const device = requiredText("--device <serial>", "d", { env: "FARM_DEVICE" });
    expect(() => resolveOption(device, "device", layers())).toThrow("--device is required (or FARM_DEVICE)");
    expect(resolveOption(device, "device", layers({ env: { FARM_DEVICE: "S1" } }))).toEqual({ value: "S1", source: "env" });
  });

  it("reads switches and lists from every layer", () => {
    const insecure = flag("--insecure", "i", { env: "FARM_INSECURE", config: "insecure" });
    expect(resolveOption(insecure, "insecure", layers({ flags: { insecure: true } })).value).toBe(true);
    expect(resolveOption(insecure, "insecure", layers({ env: { FARM_INSECURE: "1" } })).value).toBe(true);
    expect(resolveOption(insecure, "insecure", layers({ env: { FARM_INSECURE: "0" }, file: { insecure: true } })).value).toBe(false);
    expect(resolveOption(insecure, "insecure", layers({ file: { insecure: true } }))).toEqual({ value: true, source: "config" });
    expect(resolveOption(insecure, "insecure", layers())).toEqual({ value: false, source: "default" });
    const label = list("--label <k=v>", "l");
    expect(resolveOption(label, "label", layers({ flags: { label: ["a=1", "b=2"] } })).value).toEqual(["a=1", "b=2"]);
    expect(resolveOption(label, "label", layers()).value).toEqual([]);
  });

  it("lets a declaration read a config value of another shape (the agent's adbStart: false is --no-adb-start)", () => {
    const noAdbStart = flag("--no-adb-start", "n", { fromConfig: (v) => (v === false ? true : v === true ? false : undefined) });
    expect(resolveOption({ ...noAdbStart, config: "adbStart" }, "noAdbStart", layers({ file: { adbStart: false } })).value).toBe(true);
    expect(resolveOption({ ...noAdbStart, config: "adbStart" }, "noAdbStart", layers({ file: { adbStart: true } })).value).toBe(false);
  });

  it("resolves a whole option set with sources", () => {
    const r = resolveOptions({ timeout, device: text("--device <serial>", "d", { env: "FARM_DEVICE" }) }, layers({ env: { FARM_DEVICE: "S" } }));
    expect(r.values).toEqual({ timeout: 30_000, device: "S" });
    expect(r.sources).toEqual({ timeout: "default", device: "env" });
  });

  it("evaluates lower layers only when needed", () => {
    let read = false;
    expect(pick([["flag", () => "a"], ["config", () => ((read = true), "b")]])).toEqual({ value: "a", source: "flag" });
    expect(read).toBe(false);
  });
});

describe("client connection settings", () => {
  let dir: string;
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  function home(): { env: NodeJS.ProcessEnv; path: string } {
    dir = mkdtempSync(join(tmpdir(), "farm-resolve-"));
    writeFileSync(join(dir, "standalone.json"), JSON.stringify({ url: "http://127.0.0.1:9999" }));
    writeFileSync(join(dir, "admin.token"), "farmu_standalone\n");
    writeFileSync(join(dir, "flag.token"), "farmu_flag\n");
    writeFileSync(join(dir, "file.token"), "farmu_tokenfile\n");
    return { env: { FARM_HOME: dir }, path: dir };
  }
  const none = { coordinator: undefined, tokenFile: undefined, caFile: undefined, insecure: false, verbose: false };

  it("coordinator: flag/env/config (resolved), then the local standalone, then the default", () => {
    const { env } = home();
    expect(resolveClientConfig({ ...none, coordinator: "http://flag:1" }, { coordinator: "flag" }, { env, file: {} })).toMatchObject({ coordinator: "http://flag:1", coordinatorSource: "--coordinator" });
    expect(resolveClientConfig({ ...none, coordinator: "http://env:1" }, { coordinator: "env" }, { env, file: {} })).toMatchObject({ coordinatorSource: "FARM_COORDINATOR" });
    expect(resolveClientConfig({ ...none, coordinator: "http://c:1" }, { coordinator: "config" }, { env, file: {}, fileName: "/etc/x.json" })).toMatchObject({ coordinatorSource: "/etc/x.json" });
    expect(resolveClientConfig(none, {}, { env, file: {} })).toMatchObject({ coordinator: "http://127.0.0.1:9999" });
    expect(resolveClientConfig(none, {}, { env: { FARM_HOME: join(dir, "nothing") }, file: {} })).toMatchObject({ coordinator: "http://127.0.0.1:7420", coordinatorSource: "default" });
    expect(() => resolveClientConfig({ ...none, coordinator: "ftp://x" }, { coordinator: "flag" }, { env, file: {} })).toThrow(/http:\/\/ or https:\/\//);
  });

  it("token: --token-file > FARM_TOKEN > the config file's token > its tokenFile > the standalone's admin token", () => {
    const { env, path } = home();
    const file = { token: "farmu_config", tokenFile: join(path, "file.token") };
    const withEnv = { ...env, FARM_TOKEN: " farmu_env " };
    expect(resolveClientConfig({ ...none, tokenFile: join(path, "flag.token") }, {}, { env: withEnv, file }).token).toBe("farmu_flag");
    expect(resolveClientConfig(none, {}, { env: withEnv, file }).token).toBe("farmu_env");
    expect(resolveClientConfig(none, {}, { env, file }).token).toBe("farmu_config");
    expect(resolveClientConfig(none, {}, { env, file: { tokenFile: file.tokenFile } }).token).toBe("farmu_tokenfile");
    expect(resolveClientConfig(none, {}, { env, file: {} }).token).toBe("farmu_standalone");
  });
});
