/**
 * Remote adb streams whose phone side does not read: `farm coordinator` and
 * `farm agent` as separate processes, one simulated phone whose `exec:cat`
 * streams are accepted and never acknowledged (devsim's hangServices), one
 * tunnel, and --streams streams (48) each pushed as fast as the farm takes
 * bytes. Once no stream takes more, it prints the agent's and the
 * coordinator's peak RSS against their own idle RSS in the same run (ratio
 * and MiB added; target for the agent: <= +64 MiB), then cancels every
 * stream and checks the coordinator no longer counts them.
 *
 *   node test/dist/bench/adb-stalled-streams.js [--streams 48] [--mib-per-stream 32]
 */
import { parseArgs } from "node:util";
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { farmTransport } from "@farm/shared/farm-transport";
import { ADB_STREAM_WINDOW_BYTES } from "@farm/shared/http2-windows";
import { AdbTunnelService, OpenAdbStreamRequestSchema, type OpenAdbStreamRequest } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { adbConnect, SimDevice } from "../devsim/index.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startSplitFarm } from "../support/split-farm.js";
import { emitReport, round } from "./bench-report.js";
import { memoryMiB } from "./proc-stats.js";

const { values } = parseArgs({ options: { streams: { type: "string", default: "48" }, "mib-per-stream": { type: "string", default: "32" } } });
const STREAMS = Number(values.streams);
const BYTES_PER_STREAM = Number(values["mib-per-stream"]) * 1024 * 1024;
const CHUNK = Buffer.alloc(64 * 1024, 0x61);
/** A plateau: this many polls in a row with no stream taking a byte. */
const QUIET_POLLS = 15;
const POLL_MS = 200;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const lab = await startSplitFarm("bench-adb-stalled", { coordinatorArgs: ["--adb-streams-per-tunnel", String(STREAMS)] });
const phone = new SimDevice({ serialno: "RBENCHSTALL" });
const calls = new AbortController();
/** The tunnel stays open while the streams are cancelled: they must end on their own. */
const tunnelCall = new AbortController();
try {
  const serial = await adbConnect(lab.adb.port, "127.0.0.1", await phone.listen());
  await waitFor(`${serial} in farm devices`, async () => {
    const list = ((await farm(["devices"], lab.env)).json["devices"] ?? []) as { serial: string; state: string; properties: { physicalId: string } }[];
    return list.some((d) => d.serial === serial && d.state === "device" && d.properties.physicalId) ? true : undefined;
  });
  phone.faults.set({ hangServices: ["exec:cat"] });
  const acquired = await farm(["lease", "acquire", "--device", serial, "--ttl", "30m"], lab.env);
  const lease = (acquired.json["lease"] as { token: string }).token;
  const caller = { url: lab.url, token: String(lab.env.FARM_TOKEN), headers: { "x-farm-lease": lease } };
  const client = createClient(AdbTunnelService, farmTransport(caller));
  // As `farm adb connect` does: the streams on a connection of their own, with adb's windows.
  const streamClient = createClient(AdbTunnelService, farmTransport({ ...caller, streamWindowBytes: ADB_STREAM_WINDOW_BYTES }));
  const events = client.openTunnel({}, { signal: tunnelCall.signal })[Symbol.asyncIterator]();
  const first = await events.next();
  if (first.done || first.value.kind.case !== "opened") throw new Error("the tunnel did not open");
  const tunnelId = first.value.kind.value.tunnelId;

  const idle = { agent: memoryMiB(lab.agent.pid).rss, coordinator: memoryMiB(lab.coordinator.pid).rss };
  let taken = 0;
  async function* feed(): AsyncGenerator<OpenAdbStreamRequest> {
    yield create(OpenAdbStreamRequestSchema, { kind: { case: "start", value: { tunnelId, service: "exec:cat" } } });
    for (let sent = 0; sent < BYTES_PER_STREAM; sent += CHUNK.length) {
      yield create(OpenAdbStreamRequestSchema, { kind: { case: "data", value: CHUNK } });
      taken += CHUNK.length;
    }
    // Held open: the stream ends when the bench cancels it.
    await new Promise((r) => calls.signal.addEventListener("abort", r, { once: true }));
  }
  const streams = Array.from({ length: STREAMS }, async () => {
    try {
      for await (const _ of streamClient.openAdbStream(feed(), { signal: calls.signal })) void _;
    } catch {
      // Cancelled by the bench.
    }
  });

  let quiet = 0;
  let last = -1;
  while (quiet < QUIET_POLLS) {
    await sleep(POLL_MS);
    quiet = taken === last ? quiet + 1 : 0;
    last = taken;
  }
  const peak = { agent: memoryMiB(lab.agent.pid).peakRss, coordinator: memoryMiB(lab.coordinator.pid).peakRss };
  const stalled = { agent: memoryMiB(lab.agent.pid).rss, coordinator: memoryMiB(lab.coordinator.pid).rss };
  const open = (await client.listTunnels({ mine: true })).tunnels.find((t) => t.tunnelId === tunnelId)?.openStreams ?? 0;

  calls.abort();
  await Promise.all(streams);
  const admin = createClient(AdbTunnelService, farmTransport({ url: lab.url, token: String(lab.env.FARM_TOKEN) }));
  const after = await waitFor("the cancelled streams uncounted", async () => {
    const t = (await admin.listTunnels({})).tunnels.find((x) => x.tunnelId === tunnelId);
    if (!t) throw new Error("the tunnel closed");
    return t.openStreams === 0 ? 0 : undefined;
  }).catch(() => -1);
  tunnelCall.abort();

  const added = (p: number, i: number) => p - i;
  console.log(`${STREAMS} remote adb streams whose phone does not read (coordinator and agent processes); ${(taken / 1024 / 1024).toFixed(1)} MiB taken by the farm before every stream stalled; ${open} streams open then`);
  console.log(
    `agent         idle RSS ${idle.agent.toFixed(1)} MiB   peak ${peak.agent.toFixed(1)} MiB   ratio ${(peak.agent / idle.agent).toFixed(2)}   added ${added(peak.agent, idle.agent).toFixed(1)} MiB (target <= +64 MiB); RSS once stalled ${
      stalled.agent.toFixed(1)
    } MiB`,
  );
  console.log(
    `coordinator   idle RSS ${idle.coordinator.toFixed(1)} MiB   peak ${peak.coordinator.toFixed(1)} MiB   ratio ${(peak.coordinator / idle.coordinator).toFixed(2)}   added ${
      added(peak.coordinator, idle.coordinator).toFixed(1)
    } MiB; RSS once stalled ${stalled.coordinator.toFixed(1)} MiB`,
  );
  console.log(`after cancelling every stream: ${after < 0 ? "still counted" : `${after} open`}`);
  const agentAdded = added(peak.agent, idle.agent);
  const coordAdded = added(peak.coordinator, idle.coordinator);
  emitReport(
    "adb-stalled-streams",
    [
      { measure: `agent peak RSS, ${STREAMS} stalled adb streams vs idle`, instant: `+${agentAdded.toFixed(0)} MiB (${(peak.agent / idle.agent).toFixed(2)}x)`, realistic: null, target: "<= +64 MiB", pass: agentAdded <= 64 },
      {
        measure: `coordinator peak RSS, ${STREAMS} stalled adb streams vs idle`,
        instant: `+${coordAdded.toFixed(0)} MiB (${(peak.coordinator / idle.coordinator).toFixed(2)}x)`,
        realistic: null,
        target: "<= +64 MiB",
        pass: coordAdded <= 64,
      },
      { measure: "stalled adb streams still counted after their callers cancelled", instant: after < 0 ? "still counted" : String(after), realistic: null, target: "0", pass: after === 0 },
    ],
    { streams: STREAMS, takenMiB: round(taken / 1024 / 1024, 1), idle, peak, stalled, openWhenStalled: open, openAfterCancel: after },
  );
} finally {
  calls.abort();
  tunnelCall.abort();
  await lab.stop();
  await phone.close();
}
