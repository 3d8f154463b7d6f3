import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { AsyncQueue } from "@farm/shared/async-queue";
import { Errors } from "@farm/shared/errors";
import { CliError } from "./cli-error.js";
import type { DeviceTarget } from "@farm/shared/gen/farm/v1/device_service_pb";
import { OpenShellRequestSchema, ShellService, type OpenShellRequest } from "@farm/shared/gen/farm/v1/shell_service_pb";
import { TerminalSizeSchema } from "@farm/shared/gen/farm/v1/shell_pb";
import type { ClientConfig } from "@farm/client/config";
import { clientTransport } from "@farm/client/transport";

/**
 * `farm shell` without a command: the device shell in this terminal. Local
 * input goes raw (every key reaches the device), window size changes follow,
 * and the terminal is restored however the session ends.
 */
export async function runInteractiveShell(config: ClientConfig, target: DeviceTarget, lease: string | undefined): Promise<number> {
  if (!config.token) throw new CliError(Errors.UNAUTHENTICATED, "no token", "token");
  const token = config.token;
  const transport = clientTransport({ ...config, token }, { lease });
  const size = () => create(TerminalSizeSchema, { rows: process.stdout.rows || 24, cols: process.stdout.columns || 80 });
  const out = new AsyncQueue<OpenShellRequest>();
  out.push(create(OpenShellRequestSchema, { kind: { case: "start", value: { target, size: size(), term: process.env["TERM"] || "xterm-256color" } } }));
  const stdin = process.stdin;
  const raw = stdin.isTTY === true;
  const onData = (chunk: Buffer) => out.push(create(OpenShellRequestSchema, { kind: { case: "stdin", value: new Uint8Array(chunk) } }));
  const onResize = () => out.push(create(OpenShellRequestSchema, { kind: { case: "resize", value: size() } }));
  let exitCode: number | undefined;
  try {
    if (raw) stdin.setRawMode(true);
    stdin.on("data", onData);
    stdin.resume();
    process.stdout.on("resize", onResize);
    for await (const res of createClient(ShellService, transport).openShell(out)) {
      if (res.kind.case === "output") process.stdout.write(res.kind.value);
      else if (res.kind.case === "exitCode") exitCode = res.kind.value;
    }
  } finally {
    process.stdout.off("resize", onResize);
    stdin.off("data", onData);
    stdin.pause();
    if (raw) stdin.setRawMode(false);
    out.close();
  }
  if (exitCode === undefined) throw new CliError(Errors.COORDINATOR_UNAVAILABLE, "the shell session ended without an exit status (the agent or coordinator went away)", undefined, { dispatched: true, ambiguous: true });
  return exitCode;
}
