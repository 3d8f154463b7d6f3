import type { DeviceTarget } from "@farm/shared/gen/farm/v1/device_service_pb";
import { asCli } from "./commands/device-target.js";
import { libraryClient } from "./commands/library-client.js";
import type { ClientSession } from "./session.js";

/**
 * `farm shell` without a command: the device shell in this terminal, through
 * @farm/client's Device.openShell. Local input goes raw (every key reaches
 * the device), window size changes follow, and the terminal is restored
 * however the session ends. Only the lease rides with it (no session step).
 */
export async function runInteractiveShell(session: ClientSession, target: DeviceTarget, lease: string | undefined): Promise<number> {
  const device = libraryClient(session).device(target.serial, { lease, agent: target.agent });
  // A terminal that reports no size (0 columns: `script`, some CI pseudo-terminals) gets the usual 24 x 80.
  const size = () => ({ rows: process.stdout.rows || 24, cols: process.stdout.columns || 80 });
  const shell = device.openShell({ size: size(), term: process.env["TERM"] || "xterm-256color", requestId: target.requestId || undefined });
  const stdin = process.stdin;
  const raw = stdin.isTTY === true;
  const onData = (chunk: Buffer) => shell.write(chunk);
  const onResize = () => shell.resize(size());
  try {
    if (raw) stdin.setRawMode(true);
    stdin.on("data", onData);
    stdin.resume();
    process.stdout.on("resize", onResize);
    await asCli((async () => {
      for await (const bytes of shell.output()) process.stdout.write(bytes);
    })());
  } finally {
    process.stdout.off("resize", onResize);
    stdin.off("data", onData);
    stdin.pause();
    if (raw) stdin.setRawMode(false);
    shell.close();
  }
  return shell.exitCode();
}
