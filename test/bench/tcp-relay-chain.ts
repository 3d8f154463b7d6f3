import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";

/**
 * One Node process that forwards every TCP connection it accepts to
 * 127.0.0.1:TO, both ways, with Nagle off: a hop that moves bytes and
 * nothing else (no framing, no RPC framework, no copies of its own).
 */
const RELAY = `
const net = require("node:net");
const to = Number(process.argv[1]);
const server = net.createServer({ noDelay: true }, (c) => {
  const u = net.connect({ host: "127.0.0.1", port: to, noDelay: true });
  c.pipe(u);
  u.pipe(c);
  c.on("error", () => u.destroy());
  u.on("error", () => c.destroy());
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
`;

export interface RelayChain {
  /** Where the first hop listens. */
  port: number;
  pids: number[];
  stop(): Promise<void>;
}

/**
 * `hops` relay processes in a row in front of 127.0.0.1:target, as the
 * tunnel has its CLI, coordinator and agent in front of the phone: the same
 * path's floor, with nothing of farm's on it.
 */
export async function startRelayChain(target: number, hops: number): Promise<RelayChain> {
  const procs: ChildProcess[] = [];
  let next = target;
  try {
    for (let i = 0; i < hops; i++) {
      const proc = spawn(process.execPath, ["-e", RELAY, String(next)], { stdio: ["ignore", "pipe", "inherit"] });
      procs.push(proc);
      const [line] = (await once(createInterface({ input: proc.stdout as NodeJS.ReadableStream }), "line")) as [string];
      next = Number(line);
    }
  } catch (err) {
    for (const p of procs) p.kill();
    throw err;
  }
  return {
    port: next,
    pids: procs.map((p) => p.pid as number),
    async stop() {
      await Promise.all(procs.map(async (p) => {
        if (p.exitCode !== null || p.signalCode !== null) return;
        p.kill();
        await once(p, "exit");
      }));
    },
  };
}
