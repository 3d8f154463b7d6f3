/**
 * `npm run devsim -- --devices N` on a port where no adb server runs yet:
 * every device must end up connected, every time. N `adb connect` calls
 * racing to start the server used to lose some of them.
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAdb } from "./host/adb-cli.js";
import { findFreePort } from "./host/free-port.js";
import { hostRequest, parseDeviceList } from "./host/host-client.js";
import { waitUntil } from "./host/wait-until.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";

// The built CLI, as `npm run devsim` runs it (vitest runs this file from source).
const devsimMain = fileURLToPath(new URL("../dist/devsim/main.js", import.meta.url));
const ROUNDS = 10;
const DEVICES = 4;

let home: TempDir;

beforeAll(async () => {
  // The adb server the CLI starts keeps its key under $HOME/.android: never the user's.
  home = await makeTempDir("devsim-cold");
});

afterAll(async () => {
  await home?.remove();
});

const answers = (port: number) => hostRequest(port, "host:version").then(() => true, () => false);

/** One cold start: devsim on a fresh port with no server; returns the serials it printed and what adb lists. */
async function coldStart(port: number): Promise<{ printed: string[]; listed: Map<string, string>; exit: number | null; stderr: string }> {
  expect(await answers(port)).toBe(false);
  const env = { ...process.env, HOME: home.path, ANDROID_ADB_SERVER_PORT: String(port) };
  const child = spawn(process.execPath, [devsimMain, "--devices", String(DEVICES), "--format", "json"], { env, stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const printed: string[] = [];
  try {
    const lines = createInterface({ input: child.stdout });
    // devsim prints one line per device once all are connected, or exits on failure.
    await Promise.race([
      new Promise<void>((resolve) =>
        lines.on("line", (line) => {
          printed.push((JSON.parse(line) as { serial: string }).serial);
          if (printed.length === DEVICES) resolve();
        })
      ),
      exited,
      new Promise((resolve) => setTimeout(resolve, 30_000).unref()),
    ]);
    const listed = printed.length === DEVICES ? parseDeviceList(await hostRequest(port, "host:devices")) : new Map<string, string>();
    return { printed, listed, exit: child.exitCode, stderr };
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
    // The server devsim started (or `adb connect` did) outlives it; stop it.
    await runAdb(port, ["kill-server"], { timeoutMs: 5_000, env }).catch(() => undefined);
    await waitUntil(async () => !(await answers(port)), { timeoutMs: 5_000, what: `the adb server on ${port} to stop` });
  }
}

describe("devsim cold start", () => {
  it(`connects all ${DEVICES} devices when no adb server runs, ${ROUNDS} times in a row`, async () => {
    for (let round = 1; round <= ROUNDS; round++) {
      const port = await findFreePort();
      const r = await coldStart(port);
      expect(r.printed, `round ${round} (port ${port}): devsim exited ${r.exit}\n${r.stderr}`).toHaveLength(DEVICES);
      for (const serial of r.printed) expect(r.listed.get(serial), `round ${round}: ${serial} in adb devices`).toBe("device");
    }
  }, 240_000);
});
