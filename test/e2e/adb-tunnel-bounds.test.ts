/**
 * Remote adb streams whose phone reads nothing: `farm coordinator` (three
 * streams per tunnel) and `farm agent` (default budgets, metrics served)
 * as separate processes, a simulated
 * phone whose `exec:cat` streams are accepted and never acknowledged
 * (devsim's hangServices), and a caller speaking AdbTunnelService directly,
 * as `farm adb connect` does, pushing bytes nobody takes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { createClient, type Client } from "@connectrpc/connect";
import { toErrorReport } from "@farm/shared/errors";
import { farmTransport } from "@farm/shared/farm-transport";
import { ADB_STREAM_WINDOW_BYTES } from "@farm/shared/http2-windows";
import { AdbTunnelService, OpenAdbStreamRequestSchema, type OpenAdbStreamRequest } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { adbConnect, SimDevice } from "../devsim/index.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";

const PER_TUNNEL = 3;
/** The agent's default --adb-tunnel-budget. */
const TUNNEL_BUDGET = 4 * 1024 * 1024;
const CHUNK = Buffer.alloc(64 * 1024, 0x62);

let lab: SplitFarm;
let phone: SimDevice;
let client: Client<typeof AdbTunnelService>;
let streams: Client<typeof AdbTunnelService>;
let tunnelId: string;
const tunnelCall = new AbortController();

beforeAll(async () => {
  lab = await startSplitFarm("adb-tunnel-bounds", {
    coordinatorArgs: ["--adb-streams-per-tunnel", String(PER_TUNNEL)],
    agentArgs: ["--metrics-listen", "127.0.0.1:0"],
  });
  phone = new SimDevice({ serialno: "RBOUNDS01" });
  const serial = await adbConnect(lab.adb.port, "127.0.0.1", await phone.listen());
  await waitFor(`${serial} in farm devices`, async () => {
    const list = ((await farm(["devices"], lab.env)).json["devices"] ?? []) as { serial: string; state: string; properties: { physicalId: string } }[];
    return list.some((d) => d.serial === serial && d.state === "device" && d.properties.physicalId) ? true : undefined;
  });
  phone.faults.set({ hangServices: ["exec:cat"] });
  const acquired = await farm(["lease", "acquire", "--device", serial], lab.env);
  const lease = (acquired.json["lease"] as { token: string }).token;
  const caller = { url: lab.url, token: String(lab.env.FARM_TOKEN), headers: { "x-farm-lease": lease } };
  client = createClient(AdbTunnelService, farmTransport(caller));
  streams = createClient(AdbTunnelService, farmTransport({ ...caller, streamWindowBytes: ADB_STREAM_WINDOW_BYTES }));
  const events = client.openTunnel({}, { signal: tunnelCall.signal })[Symbol.asyncIterator]();
  const first = await events.next();
  if (first.done || first.value.kind.case !== "opened") throw new Error("the tunnel did not open");
  tunnelId = first.value.kind.value.tunnelId;
}, 120_000);

afterAll(async () => {
  tunnelCall.abort();
  await lab?.stop();
  await phone?.close();
});

/** One stream on the phone that reads nothing, pushed `bytes` into until cancelled; resolves with how it ended. */
function stalledStream(signal: AbortSignal, bytes = 32 * 1024 * 1024): Promise<unknown> {
  async function* feed(): AsyncGenerator<OpenAdbStreamRequest> {
    yield create(OpenAdbStreamRequestSchema, { kind: { case: "start", value: { tunnelId, service: "exec:cat" } } });
    for (let sent = 0; sent < bytes; sent += CHUNK.length) yield create(OpenAdbStreamRequestSchema, { kind: { case: "data", value: CHUNK } });
    await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
  }
  return (async () => {
    for await (const _ of streams.openAdbStream(feed(), { signal })) void _;
  })().then(
    () => "ended",
    (err: unknown) => err,
  );
}

/** One of the agent's remote adb gauges, as it serves them now. */
async function agentGauge(name: string): Promise<number> {
  const text = await (await fetch(String(lab.agent.ready["metricsUrl"]))).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  if (!line) throw new Error(`the agent serves no ${name}`);
  return Number(line.slice(name.length + 1));
}

async function tunnelNow() {
  const t = (await client.listTunnels({ mine: true })).tunnels.find((x) => x.tunnelId === tunnelId);
  if (!t) throw new Error("the tunnel closed");
  return t;
}

async function openStreams(): Promise<number> {
  return (await tunnelNow()).openStreams;
}

describe("remote adb streams whose phone reads nothing", () => {
  it("hold no more than the tunnel's budget on the agent, and end with their caller: uncounted by the coordinator and the agent, their bytes freed, their room free again", async () => {
    const cancel = new AbortController();
    const ended = Array.from({ length: PER_TUNNEL }, () => stalledStream(cancel.signal));
    await waitFor("the coordinator counting the streams", async () => ((await openStreams()) === PER_TUNNEL ? true : undefined), { timeoutMs: 30_000 });
    // Bytes on their way to a phone that reads none of them: more than the adb server takes without an OKAY.
    await waitFor("bytes in the stalled streams", async () => ((await tunnelNow()).bytesToDevice >= 3n * 1024n * 1024n ? true : undefined), { timeoutMs: 60_000 });

    // The tunnel is full: one more is refused.
    const over = await stalledStream(new AbortController().signal, 0);
    expect(toErrorReport(over)).toMatchObject({ code: "TUNNEL_LIMIT" });

    cancel.abort();
    await Promise.all(ended);
    // The coordinator forgets them and tells the agent, which closes the phone's side although
    // the phone read nothing, and gives their bytes back.
    await waitFor("the coordinator to uncount the cancelled streams", async () => ((await openStreams()) === 0 ? true : undefined), { timeoutMs: 30_000 });
    await waitFor("the agent to close them", async () => ((await agentGauge("farm_agent_adb_streams")) === 0 ? true : undefined), { timeoutMs: 30_000 });
    expect(await agentGauge("farm_agent_adb_held_bytes")).toBe(0);
    // 96 MiB were pushed at a phone that reads nothing: once the socket to the adb server was
    // full, the agent held bytes up to the tunnel's budget and took no more.
    const peak = await agentGauge("farm_agent_adb_held_peak_bytes");
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThanOrEqual(TUNNEL_BUDGET);

    // Their room is free again, on the coordinator and on the agent. (The adb server keeps the
    // phone's side of a stream with a write the phone never acknowledged: it stops watching
    // that socket. Streams with nothing unacknowledged close on the phone too.)
    const before = phone.hungStreams;
    const again = new AbortController();
    const more = Array.from({ length: PER_TUNNEL }, () => stalledStream(again.signal, 0));
    await waitFor("new streams open on the phone", () => (phone.hungStreams === before + PER_TUNNEL ? true : undefined), { timeoutMs: 30_000 });
    again.abort();
    await Promise.all(more);
    await waitFor("those closed on the phone", () => (phone.hungStreams === before ? true : undefined), { timeoutMs: 30_000 });
  }, 180_000);
});
