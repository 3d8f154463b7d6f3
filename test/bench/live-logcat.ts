/**
 * The live logcat, with `farm coordinator` and `farm agent` as separate
 * processes and a simulated phone whose log gets --rate lines a second
 * (an app logging busily): the coordinator's CPU with 1 viewer, then with
 * --viewers viewers of the same phone. The phone's log is read once (one
 * stream per phone, shared), so a viewer adds only its own sending: the
 * ratio many / one and the CPU per added viewer are the figures, judged
 * against the one-viewer run measured in the same run.
 *
 *   node test/dist/bench/live-logcat.js [--viewers 10] [--rate 500] [--seconds 8]
 */
import { parseArgs } from "node:util";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { LogcatService } from "@farm/shared/gen/farm/v1/logcat_service_pb";
import { adbConnect, SimDevice } from "../devsim/index.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startSplitFarm } from "../support/split-farm.js";
import { cpuSeconds, median } from "./proc-stats.js";
import { emitReport, round } from "./bench-report.js";

const { values } = parseArgs({ options: { viewers: { type: "string", default: "10" }, rate: { type: "string", default: "500" }, seconds: { type: "string", default: "8" } } });
const VIEWERS = Number(values.viewers);
const RATE = Number(values.rate);
const SECONDS = Number(values.seconds);

async function main(): Promise<void> {
  const lab = await startSplitFarm("bench-live-logcat");
  const phone = new SimDevice({ serialno: "RBENCHLOG" });
  try {
    const serial = await adbConnect(lab.adb.port, "127.0.0.1", await phone.listen());
    await waitFor(`${serial} in farm devices`, async () => {
      const list = ((await farm(["devices"], lab.env)).json["devices"] ?? []) as { serial: string; properties: { physicalId: string } }[];
      return list.find((d) => d.serial === serial)?.properties.physicalId || undefined;
    });
    const acquired = await farm(["lease", "acquire", "--device", serial, "--ttl", "30m"], lab.env);
    const leaseToken = (acquired.json["lease"] as { token: string }).token;
    const auth: Interceptor = (next) => (req) => {
      req.header.set("authorization", `Bearer ${String(lab.env["FARM_TOKEN"])}`);
      req.header.set("x-farm-lease", leaseToken);
      return next(req);
    };
    const logcat = createClient(LogcatService, createGrpcTransport({ baseUrl: lab.url, interceptors: [auth] }));
    const metric = async (name: string) => (await (await fetch(`${lab.url}/metrics`)).text()).split("\n").find((l) => l.startsWith(`${name} `))?.split(" ")[1];
    const coordinatorPid = lab.coordinator.pid;
    let seq = 0;

    const measure = async (n: number) => {
      const stop = new AbortController();
      const counts = Array.from({ length: n }, () => ({ lines: 0, marks: 0 }));
      const viewers = counts.map(async (c) => {
        try {
          for await (const res of logcat.watchLogcat({ target: { serial } }, { signal: stop.signal })) {
            c.lines += res.lines.length;
            for (const l of res.lines) if (l.tag === "benchmark") c.marks++;
          }
        } catch {
          // stopped
        }
      });
      // Every viewer is on the one feed before the clock starts.
      await waitFor(`${n} logcat viewers`, async () => ((await metric("farm_live_logcat_viewers")) === String(n) ? true : undefined));
      const feeds = await metric("farm_live_logcats");
      counts.forEach((c) => ((c.lines = 0), (c.marks = 0)));
      const cpu0 = cpuSeconds(coordinatorPid);
      const t0 = Date.now();
      let written = 0;
      // The app logs in bursts every 20 ms, RATE lines a second in all.
      const driver = setInterval(() => {
        const due = Math.floor(((Date.now() - t0) / 1000) * RATE) - written;
        for (let i = 0; i < due; i++) phone.state.log.add({ pid: 4242, priority: 4, tag: "benchmark", message: `line ${seq++} of a busy app's log, long enough to look like one` });
        written += Math.max(0, due);
      }, 20);
      await new Promise((r) => setTimeout(r, SECONDS * 1000));
      clearInterval(driver);
      const secs = (Date.now() - t0) / 1000;
      const cpu = (cpuSeconds(coordinatorPid) - cpu0) / secs;
      // Every viewer got every line written (none fell behind), waited on, not assumed.
      await waitFor("every viewer caught up", async () => (counts.every((c) => c.marks >= written) ? true : undefined));
      stop.abort();
      await Promise.all(viewers);
      return { cpu, feeds, linesPerSecond: median(counts.map((c) => c.marks)) / secs, written };
    };
    const one = await measure(1);
    const many = await measure(VIEWERS);
    const ratio = many.cpu / one.cpu;
    const perViewer = Math.max(0, many.cpu - one.cpu) / (VIEWERS - 1);

    console.log(`live logcat (coordinator and agent processes, devsim), ${RATE} lines/s, 1 and ${VIEWERS} viewers of one phone for ${SECONDS} s`);
    console.log(`phone streams      ${one.feeds} with 1 viewer, ${many.feeds} with ${VIEWERS} (one per phone, shared)`);
    console.log(`coordinator CPU    1 viewer ${(one.cpu * 100).toFixed(1)}% of a core, ${VIEWERS} viewers ${(many.cpu * 100).toFixed(1)}%: ratio ${ratio.toFixed(2)}x for ${VIEWERS}x the viewers`);
    console.log(`per added viewer   ${(perViewer * 100).toFixed(2)}% of a core at ${RATE} lines/s (target <= 1%)`);
    emitReport(
      "live-logcat",
      [
        {
          measure: `live logcat coordinator CPU, ${VIEWERS} viewers / 1 viewer`,
          instant: `${ratio.toFixed(2)}x`,
          realistic: null,
          baseline: `1 viewer ${(one.cpu * 100).toFixed(1)}% of a core`,
          target: `< ${VIEWERS}x (one stream per phone)`,
          pass: ratio < VIEWERS && many.feeds === "1",
        },
        { measure: "  coordinator CPU per added logcat viewer", instant: `${(perViewer * 100).toFixed(2)}% of a core at ${RATE} lines/s`, realistic: null, target: "<= 1%", pass: perViewer <= 0.01 },
      ],
      { viewers: VIEWERS, linesPerSecond: RATE, cpuOneViewer: round(one.cpu, 4), cpuManyViewers: round(many.cpu, 4), ratio: round(ratio, 3), cpuPerAddedViewer: round(perViewer, 4), phoneStreams: Number(many.feeds) },
    );
    await farm(["lease", "release"], { ...lab.env, FARM_LEASE: leaseToken });
  } finally {
    await lab.stop();
    await phone.close();
  }
}

await main();
