import type { Service } from "./service.js";
import { runShellSession } from "./shell-service.js";

/**
 * `exec:CMD` — a raw pipe to a command (adb exec-out/exec-in): no PTY, no
 * framing, stderr mixed into the stream as with `shell:`.
 */
export const execService: Service = {
  prefixes: ["exec:"],
  open(request) {
    const command = request.name.slice("exec:".length);
    return (stream) => runShellSession(stream, request.device, { v2: false, pty: false, term: undefined, command });
  },
};
