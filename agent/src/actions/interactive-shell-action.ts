import { create } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import { spawn as spawnPty } from "node-pty";
import { AsyncQueue } from "@farm/shared/async-queue";
import { AgentShellService, ServeShellRequestSchema, type ServeShellRequest } from "@farm/shared/gen/farm/v1/agent_shell_service_pb";
import type { StartShellRequest } from "@farm/shared/gen/farm/v1/agent_control_service_pb";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { DispatchFailure, type ActionKind } from "../ownership/device-ownership.js";

export interface InteractiveShellRequest {
  command: StartShellRequest;
  /** Told once the terminal runs and its stream to the coordinator is open. */
  onStarted: (actionId: string) => void;
}

/**
 * An interactive device shell: `adb shell` in a pseudo-terminal on the agent
 * host, relayed through the coordinator on a stream of its own. The session
 * holds the device lock for its whole life; its end settles the journal
 * entry with the exit code. What was typed cannot be proven afterwards.
 */
export function interactiveShellAction(adb: AdbServerAddress, transport: Transport, adbBinary = "adb"): ActionKind<InteractiveShellRequest, { exitCode: number }> {
  return {
    kind: "interactive-shell",
    journalRequest: (req) => ({ term: req.command.term, rows: req.command.size?.rows ?? 24, cols: req.command.size?.cols ?? 80 }),
    async dispatch(device, req, action, signal, progress) {
      const size = req.command.size;
      let term;
      try {
        term = spawnPty(adbBinary, ["-H", adb.host, "-P", String(adb.port), "-s", device.serial, "shell"], {
          name: req.command.term || "xterm-256color",
          cols: Math.min(1000, Math.max(1, size?.cols || 80)),
          rows: Math.min(1000, Math.max(1, size?.rows || 24)),
          env: { ...process.env, TERM: req.command.term || "xterm-256color" } as Record<string, string>,
        });
      } catch (err) {
        throw new DispatchFailure(`cannot start adb in a terminal: ${(err as Error).message}`, false);
      }
      progress.phase = "accepted";
      const out = new AsyncQueue<ServeShellRequest>();
      out.push(create(ServeShellRequestSchema, { kind: { case: "sessionId", value: req.command.sessionId } }));
      const exited = new Promise<number>((resolve) => term.onExit(({ exitCode }) => resolve(exitCode)));
      term.onData((data) => out.push(create(ServeShellRequestSchema, { kind: { case: "output", value: Buffer.from(data, "utf8") } })));
      const stopStream = new AbortController();
      const inbound = (async () => {
        try {
          for await (const msg of createClient(AgentShellService, transport).serveShell(out, { signal: stopStream.signal })) {
            if (msg.kind.case === "stdin") term.write(Buffer.from(msg.kind.value).toString("utf8"));
            else if (msg.kind.case === "resize") term.resize(Math.max(1, msg.kind.value.cols), Math.max(1, msg.kind.value.rows));
            else if (msg.kind.case === "hangup") term.kill("SIGHUP");
          }
        } catch {
          // The coordinator or the caller went away: end the session.
        }
        term.kill("SIGHUP");
      })();
      const onAbort = () => term.kill("SIGHUP");
      signal.addEventListener("abort", onAbort, { once: true });
      req.onStarted(action.actionId);
      const exitCode = await exited;
      signal.removeEventListener("abort", onAbort);
      out.push(create(ServeShellRequestSchema, { kind: { case: "exitCode", value: exitCode } }));
      out.close();
      // Let the exit code reach the coordinator before the stream is cut.
      await Promise.race([inbound, new Promise((r) => setTimeout(r, 2_000))]);
      stopStream.abort();
      return { result: { exitCode }, receipt: { exitCode, provenBy: "session ended" } };
    },
    prove: async () => undefined,
  };
}
