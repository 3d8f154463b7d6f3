/** How the host asked for a shell: `shell:CMD` or `shell,v2,TERM=x,raw:CMD`. */
export interface ShellRequest {
  /** Shell v2 framing (exit status, separate stderr). */
  v2: boolean;
  /** Run under a (simulated) terminal: \n becomes \r\n, input is echoed. */
  pty: boolean;
  term: string | undefined;
  /** Command text; empty means an interactive shell reading stdin. */
  command: string;
}

export function parseShellRequest(service: string): ShellRequest | undefined {
  const colon = service.indexOf(":");
  if (colon < 0) return undefined;
  const head = service.slice(0, colon);
  const command = service.slice(colon + 1);
  const [name, ...args] = head.split(",");
  if (name !== "shell") return undefined;
  const term = args.find((arg) => arg.startsWith("TERM="))?.slice("TERM=".length);
  // adbd's default: a pty for interactive sessions, raw for commands.
  const pty = args.includes("pty") || (!args.includes("raw") && command === "");
  return { v2: args.includes("v2"), pty, term, command };
}
