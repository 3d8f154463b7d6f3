/**
 * The direct calls of routing-overhead.ts from a process of their own: the
 * same adbkit `shell echo hi` and the same device job (DeviceJobs, as the
 * agent runs it), but not in the process that simulates the phone. In the
 * benchmark's own process the client and devsim share one event loop, so
 * a direct call never waits for a sleeping process to wake up between the
 * adb server's messages, while a routed call (the agent in `farm standalone`)
 * does at every one; here the direct calls wait as the agent does.
 *
 * Protocol: one line on stdin, "echo <serial>" or "job <serial>"; one line
 * back, the call's milliseconds (or "error <message>"). Started with the adb
 * server's port as its argument; exits when stdin ends.
 */
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { DeviceJobs } from "@farm/agent/actions/device-job";
import type { ActionRow } from "@farm/agent/ownership/ownership-journal";

const port = Number(process.argv[2]);
const adbkit = createRequire(import.meta.url)("@devicefarmer/adbkit") as {
  Adb: { createClient(o: { port: number }): { getDevice(serial: string): { shell(cmd: string): Promise<unknown> } }; util: { readAll(s: unknown): Promise<Buffer> } };
};
const adb = adbkit.Adb.createClient({ port });
const jobs = new DeviceJobs({ host: "127.0.0.1", port }, () => []);

async function call(kind: string, serial: string): Promise<number> {
  if (kind === "echo") {
    const t = performance.now();
    await adbkit.Adb.util.readAll(await adb.getDevice(serial).shell("echo hi"));
    return performance.now() - t;
  }
  const action = { actionId: randomUUID(), requestSha256: "0".repeat(64), createdAt: Date.now() } as ActionRow;
  const t = performance.now();
  const r = await jobs.run(serial, "echo hi", action, AbortSignal.timeout(10_000), { phase: "before", note: () => {}, released: new AbortController().signal });
  const took = performance.now() - t;
  void jobs.acknowledge(serial, action);
  if (r.exitCode !== 0) throw new Error(`the job exited ${r.exitCode}`);
  return took;
}

// One call at a time: the benchmark waits for each answer before it goes on.
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const [kind = "", serial = ""] = line.split(" ");
  const answer = await call(kind, serial).then((ms) => String(ms), (err: unknown) => `error ${err instanceof Error ? err.message : String(err)}`);
  process.stdout.write(answer + "\n");
}
process.exit(0);
