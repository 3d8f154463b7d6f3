import { runInteractive } from "../shell/interactive.js";
import { BytePipe, type OutputSink } from "../shell/io.js";
import { Shell } from "../shell/shell.js";
import type { ServiceStream } from "../transport/adb-stream.js";
import type { Service, ServiceDevice } from "./service.js";
import { parseShellRequest, type ShellRequest } from "./shell-request.js";
import { SHELL_PACKET_HEADER, ShellPacketId, ShellPacketParser, encodeExitPacket, encodeShellPacket, parseWindowSize } from "./shell-v2-packet.js";

/** `shell:CMD` (v1: raw interleaved output, no status) and `shell,v2,…:CMD`. */
export const shellService: Service = {
  prefixes: ["shell:", "shell,"],
  open(request) {
    const shell = parseShellRequest(request.name);
    if (!shell) return undefined;
    return (stream) => runShellSession(stream, request.device, shell);
  },
};

/** Terminal size from shell v2 window-size packets (kept for commands like `wm`/`stty` later). */
export interface TerminalSize {
  rows: number;
  cols: number;
}

export async function runShellSession(stream: ServiceStream, device: ServiceDevice, request: ShellRequest): Promise<void> {
  // stdin behaves like a pipe into the shell process: bounded, so a command
  // that does not read stops the host's writes (flow control) once it fills.
  const stdin = new BytePipe();
  const terminal: TerminalSize = { rows: 24, cols: 80 };
  const raw = request.v2 ? v2Sink(stream, ShellPacketId.STDOUT) : rawSink(stream);
  const stdout = request.pty ? onlcr(raw) : raw;
  const stderr = request.v2 ? (request.pty ? onlcr(v2Sink(stream, ShellPacketId.STDERR)) : v2Sink(stream, ShellPacketId.STDERR)) : stdout;
  void pumpInput(stream, stdin, request, stdout, terminal).catch(() => stdin.close());

  const shell = new Shell({ device: device.state, stdin, stdout, stderr, signal: stream.signal, ...(request.pty ? { terminal } : {}) });
  // Without a command, sh reads its script from stdin (with a prompt on a terminal).
  const prompt = request.pty ? `${device.state.props.get("ro.product.device") ?? "localhost"}:/ $ ` : undefined;
  const status = request.command !== "" ? await shell.run(request.command) : await runInteractive(shell, stdin, stdout, prompt);
  stdin.closeRead();
  // v2 clients read until the stream closes, so the exit packet is followed by CLSE (when the runner returns).
  if (request.v2 && !stream.closed) await stream.write(encodeExitPacket(status));
}

/** Copies host input into stdin: raw bytes (v1) or stdin/close-stdin/window-size packets (v2). */
async function pumpInput(stream: ServiceStream, stdin: BytePipe, request: ShellRequest, echo: OutputSink, terminal: TerminalSize): Promise<void> {
  const parser = request.v2 ? new ShellPacketParser() : undefined;
  const deliver = async (data: Buffer) => {
    if (!request.pty) return stdin.write(data);
    // Terminal line discipline: CR becomes NL (icrnl), input is echoed, ^D ends input.
    const eof = data.indexOf(0x04);
    const text = Buffer.from((eof >= 0 ? data.subarray(0, eof) : data).toString("latin1").replace(/\r/g, "\n"), "latin1");
    await echo.write(text);
    await stdin.write(text);
    if (eof >= 0) stdin.close();
  };
  for (let chunk = await stream.read(); chunk; chunk = await stream.read()) {
    if (!parser) {
      await deliver(chunk);
      continue;
    }
    for (const packet of parser.push(chunk)) {
      if (packet.id === ShellPacketId.STDIN) await deliver(packet.data);
      else if (packet.id === ShellPacketId.CLOSE_STDIN) stdin.close();
      else if (packet.id === ShellPacketId.WINDOW_SIZE) Object.assign(terminal, parseWindowSize(packet.data.toString("latin1")) ?? {});
    }
  }
  stdin.close();
}

function rawSink(stream: ServiceStream): OutputSink {
  return { write: (data) => stream.write(data) };
}

/** Wraps output in v2 packets small enough that each fits one WRTE. */
function v2Sink(stream: ServiceStream, id: number): OutputSink {
  return {
    async write(data) {
      const bytes = typeof data === "string" ? Buffer.from(data) : data;
      const max = Math.max(1, stream.maxPayload - SHELL_PACKET_HEADER);
      for (let offset = 0; offset < bytes.length; offset += max) {
        await stream.write(encodeShellPacket(id, bytes.subarray(offset, offset + max)));
      }
    },
  };
}

/** Terminal output processing: every \n leaves as \r\n. */
function onlcr(sink: OutputSink): OutputSink {
  return {
    write: (data) => sink.write(Buffer.from((typeof data === "string" ? Buffer.from(data) : Buffer.from(data)).toString("latin1").replace(/\n/g, "\r\n"), "latin1")),
  };
}
