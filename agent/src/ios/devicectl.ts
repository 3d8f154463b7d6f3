import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { ensurePrivateDir } from "@farm/shared/secure-file";
import { runBounded } from "../video/bounded-process.js";

/**
 * Apple's `devicectl` (Xcode 15+), run as configured: `xcrun devicectl` on a
 * Mac, or any executable with the same command line (tests use a stand-in).
 * Only two commands are used: `list devices` and `device copy from`.
 */
export interface Devicectl {
  command: string[];
  /**
   * Where each run's output file and copies go (a dir per run, removed when it ends): in the
   * agent's data dir, not /tmp, so that a run the agent was killed in leaves its dir where the
   * agent's next start removes it (resetDevicectlDir).
   */
  workDir: string;
}

export interface DevicectlDevice {
  identifier: string;
  hardwareProperties?: { udid?: string; marketingName?: string; productType?: string; platform?: string };
  deviceProperties?: { name?: string; osVersionNumber?: string; developerModeStatus?: string; ddiServicesAvailable?: boolean };
  connectionProperties?: { pairingState?: string; tunnelState?: string; tunnelIPAddress?: string; transportType?: string };
}

const TOOL_TIMEOUT_MS = 15_000;
const OUTPUT_CAP = 4 * 1024 * 1024;

/** "xcrun devicectl" → the argv prefix; workDir as in Devicectl. */
export function parseDevicectl(text: string, workDir: string): Devicectl {
  const command = text.trim().split(/\s+/).filter(Boolean);
  if (command.length === 0) throw new Error("empty devicectl command");
  return { command, workDir };
}

/** Empties (or makes) the tool's workDir, private to the agent: what runs of an earlier, killed agent left goes. */
export async function resetDevicectlDir(tool: Devicectl): Promise<void> {
  await rm(tool.workDir, { recursive: true, force: true });
  await ensurePrivateDir(tool.workDir);
}

async function run(tool: Devicectl, args: string[], timeoutMs: number): Promise<{ json: unknown; stderr: string }> {
  const dir = await mkdtemp(join(tool.workDir, "run-"));
  const out = join(dir, "out.json");
  try {
    const [bin, ...pre] = tool.command as [string, ...string[]];
    const r = await runBounded(bin, [...pre, ...args, "--json-output", out], { deadlineMs: timeoutMs, maxOutputBytes: OUTPUT_CAP });
    if (r.spawnError) throw new Error(`devicectl could not start (${bin}): ${r.spawnError}`);
    if (r.timedOut) throw new Error(`devicectl ${args.slice(0, 2).join(" ")} passed ${timeoutMs} ms`);
    const json = await readFile(out, "utf8").then((t) => JSON.parse(t) as unknown, () => undefined);
    if (r.exitCode !== 0) {
      const message = (json as { error?: { userInfo?: { NSLocalizedDescription?: { string?: string } } } } | undefined)?.error?.userInfo?.NSLocalizedDescription?.string;
      throw new Error(message ?? (r.stderr.trim().split("\n").pop() || `devicectl exited ${r.exitCode}`));
    }
    return { json, stderr: r.stderr };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export async function listDevices(tool: Devicectl, timeoutMs = TOOL_TIMEOUT_MS): Promise<DevicectlDevice[]> {
  const { json } = await run(tool, ["list", "devices"], timeoutMs);
  const devices = (json as { result?: { devices?: unknown } } | undefined)?.result?.devices;
  if (!Array.isArray(devices)) throw new Error("devicectl list devices gave no result.devices");
  return devices.filter((d): d is DevicectlDevice => typeof (d as DevicectlDevice)?.identifier === "string");
}

/**
 * Copies one file out of an app's data container (`device copy from
 * --domain-type appDataContainer`), refusing anything over maxBytes.
 */
export async function copyFromAppContainer(tool: Devicectl, device: string, bundleId: string, source: string, maxBytes: number, timeoutMs = TOOL_TIMEOUT_MS): Promise<Buffer> {
  const dir = await mkdtemp(join(tool.workDir, "copy-"));
  const dest = join(dir, "copied");
  try {
    await run(tool, ["device", "copy", "from", "--device", device, "--domain-type", "appDataContainer", "--domain-identifier", bundleId, "--source", source, "--destination", dest], timeoutMs);
    const size = (await stat(dest)).size;
    if (size > maxBytes) throw new RangeError(`${source} is ${size} bytes; at most ${maxBytes} are read`);
    return await readFile(dest);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
