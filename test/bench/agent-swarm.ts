/**
 * Many lightweight simulated agents in a process of their own (fake-agent.ts:
 * a control stream each, a fixed inventory, heartbeats with a random phase),
 * so that a benchmark's measuring client shares neither its event loop nor
 * its garbage collector with them. Started by coordinator-load.ts:
 *
 *   node test/dist/bench/agent-swarm.js --url U --tokens FILE --agents 1000 --devices 10 --heartbeat-ms 5000
 *
 * FILE holds one agent token a line (agent i uses line i). Prints one JSON
 * line once every agent is accepted and has sent its inventory, then runs
 * until its stdin closes (the parent exited or is done).
 */
import { setMaxListeners } from "node:events";
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { attachFakeAgent, fakeDevices } from "../support/fake-agent.js";

const { values } = parseArgs({
  options: {
    url: { type: "string" },
    tokens: { type: "string" },
    agents: { type: "string", default: "1000" },
    devices: { type: "string", default: "10" },
    "heartbeat-ms": { type: "string", default: "5000" },
  },
});
if (!values.url || !values.tokens) throw new Error("--url and --tokens are required");
const AGENTS = Number(values.agents);
const DEVICES = Number(values.devices);
const HEARTBEAT_MS = Number(values["heartbeat-ms"]);

const tokens = (await readFile(values.tokens, "utf8")).split("\n").filter((t) => t !== "");
if (tokens.length < AGENTS) throw new Error(`${values.tokens} holds ${tokens.length} tokens for ${AGENTS} agents`);

const stop = new AbortController();
// Every agent listens to the one signal.
setMaxListeners(AGENTS * 4 + 10, stop.signal);
const t0 = performance.now();
for (let i = 0; i < AGENTS; i += 50) {
  await Promise.all(
    Array.from(
      { length: Math.min(50, AGENTS - i) },
      (_, k) => attachFakeAgent({ url: values.url as string, token: tokens[i + k] as string, index: i + k, devices: fakeDevices(i + k, DEVICES), heartbeatMs: HEARTBEAT_MS, signal: stop.signal }),
    ),
  );
}
console.log(JSON.stringify({ ok: true, agents: AGENTS, attachSeconds: Number(((performance.now() - t0) / 1000).toFixed(2)) }));

process.stdin.resume();
process.stdin.once("end", () => {
  stop.abort();
  setTimeout(() => process.exit(0), 200).unref();
});
