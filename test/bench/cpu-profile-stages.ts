/**
 * Where a farm process's CPU went, by stage of a call, from V8 CPU profiles
 * (`FARM_PROFILE_DIR=… node test/dist/bench/replicas.js --only leases`
 * writes one per process). Each sample's self time goes to the stage of the
 * innermost frame of farm's own code on its stack (auth, lease manager,
 * store, notices, …); a sample with none of farm's code on it (an async
 * continuation: a socket read, a parser) goes by the library it is in.
 * Only the busiest `--window` seconds of each profile are counted, so start-up
 * and idle tails do not dilute the figures.
 *
 *   node test/dist/bench/cpu-profile-stages.js [--window 10] [--top 25] [--per-stage 4] [--activities] file.cpuprofile…
 */
import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import { parseArgs } from "node:util";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Stages of farm's own code, by the path of the compiled file (first match wins). */
const OWN_STAGES: [RegExp, string][] = [
  [/\/auth\//, "auth (token check, access rule)"],
  [/\/leases\/(pg|sqlite)-lease-store|\/db\//, "store (farm's statements)"],
  [/\/leases\//, "lease manager"],
  [/\/replicas\/|change-bus/, "notices and replica links"],
  [/\/watch\/|\/activity\//, "events, watchers, activity"],
  [/\/sessions\/|\/cleanup\//, "sessions, cleanup"],
  [/\/http\/|\/grpc-unary\/|\/grpc-stream\/|coordinator\/dist\/[a-z-]+\.js$/, "serving the call (http/2, framing)"],
  [/\/registry\/|\/routing\/|\/devices\//, "registry, routing"],
];
/** Libraries, for samples with no frame of farm's own. */
const LIBRARY_STAGES: [RegExp, string][] = [
  [/node_modules\/(pg|pg-protocol|pg-pool|pg-types|postgres-)/, "pg client"],
  [/node_modules\/drizzle-orm/, "drizzle"],
  [/node_modules\/kysely/, "kysely"],
  [/node_modules\/(better-sqlite3)/, "sqlite"],
  [/node_modules\/@bufbuild\/protobuf/, "protobuf"],
  [/node_modules\/@connectrpc/, "connect (serving the call)"],
  [/^node:http2|^node:internal\/http2/, "node http2"],
  [/^node:net|^node:internal\/stream|^node:stream|^node:internal\/net/, "node sockets, streams"],
];

function stageOf(frames: ProfileNode["callFrame"][]): string {
  // Innermost of farm's own frames decides; library frames inside it are that stage's cost.
  for (const f of frames) {
    if (!/\/(coordinator|shared|agent)\/dist\//.test(f.url)) continue;
    for (const [re, name] of OWN_STAGES) if (re.test(f.url)) return name;
    return `farm: ${f.url.replace(/^.*\/(coordinator|shared|agent)\/dist\//, "$1/")}`;
  }
  const leaf = frames[0];
  if (!leaf) return "(none)";
  if (leaf.functionName === "(garbage collector)") return "GC";
  if (leaf.functionName === "(program)") return "(program: V8, native)";
  for (const f of frames) for (const [re, name] of LIBRARY_STAGES) if (re.test(f.url)) return `${name}, no farm frame`;
  return leaf.url ? `other: ${leaf.url.replace(/^.*node_modules\//, "")}` : `native: ${leaf.functionName}`;
}

/**
 * `--activities`: what the process was doing, by any frame on the stack rather than the innermost
 * (a notice's receipt starts in pg's notification parser; a lease call in the HTTP/2 server), so a
 * library's work is counted for the activity that called it. Async continuations with no such frame
 * (a statement's result arriving) count as the library's.
 */
const ACTIVITIES: [RegExp, string][] = [
  [/Notification|^deliver .*pg-change-bus|applyNotice|leaseRowOf/, "receiving notices (parse, apply, listeners)"],
  [/pg-change-bus/, "publishing notices"],
  [/membership|heartbeat|replica-store|agent-service|nextWithin/, "heartbeats, membership"],
  [/node_modules\/(pg|pg-protocol|pg-pool|pg-types|drizzle-orm|kysely)\//, "pg client (statements sent, results read)"],
  [/lease-service|lease-manager|lease-store/, "lease calls: farm's lease code"],
  [/\/auth\//, "lease calls: authentication"],
  [/http2|coordinator\/dist\/http|connectrpc|bufbuild/, "lease calls: HTTP/2, framing, protobuf"],
  [/node:net|stream|writev|writeBuffer/, "sockets (no caller on the stack)"],
  [/timers|listOnTimeout/, "timers"],
];

function activityOf(frames: ProfileNode["callFrame"][]): string {
  if (frames[0]?.functionName === "(garbage collector)") return "GC";
  for (const [re, name] of ACTIVITIES) if (frames.some((f) => re.test(`${f.functionName} ${f.url}`))) return name;
  return "other (V8, microtasks)";
}

async function summarize(file: string, windowS: number, top: number, perStage: number): Promise<void> {
  const p = JSON.parse(await readFile(file, "utf8")) as Profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  // Idle, and loading modules (start-up, a lazy import): neither is a call's cost.
  const idle = new Set(p.nodes.filter((n) => n.callFrame.functionName === "(idle)").map((n) => n.id));
  const loading = (id: number): boolean => {
    for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) {
      const f = (byId.get(n) as ProfileNode).callFrame;
      if (/^node:internal\/modules\//.test(f.url) || f.functionName === "compileSourceTextModule") return true;
    }
    return false;
  };
  for (const n of p.nodes) if (loading(n.id)) idle.add(n.id);
  // Sample times, then the busiest window (most non-idle time).
  const times: number[] = [];
  let t = 0;
  for (const d of p.timeDeltas) times.push(t += d);
  const weight = (i: number) => (i + 1 < times.length ? (times[i + 1] as number) - (times[i] as number) : 0);
  const span = windowS * 1e6;
  let best = { from: 0, to: times.length, busy: -1 };
  let lo = 0;
  let busy = 0;
  for (let hi = 0; hi < times.length; hi++) {
    if (!idle.has(p.samples[hi] as number)) busy += weight(hi);
    while ((times[hi] as number) - (times[lo] as number) > span) {
      if (!idle.has(p.samples[lo] as number)) busy -= weight(lo);
      lo++;
    }
    if (busy > best.busy) best = { from: lo, to: hi + 1, busy };
  }
  const stages = new Map<string, number>();
  const fns = new Map<string, number>();
  let total = 0;
  for (let i = best.from; i < best.to; i++) {
    const id = p.samples[i] as number;
    if (idle.has(id)) continue;
    const w = weight(i);
    const frames: ProfileNode["callFrame"][] = [];
    for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) frames.push((byId.get(n) as ProfileNode).callFrame);
    const stage = values.activities ? activityOf(frames) : stageOf(frames);
    stages.set(stage, (stages.get(stage) ?? 0) + w);
    const leaf = frames[0] as ProfileNode["callFrame"];
    const fn = `${leaf.functionName || "(anonymous)"} ${leaf.url.replace(/^.*node_modules\//, "").replace(/^.*\/(coordinator|shared)\/dist\//, "$1/")}:${leaf.lineNumber + 1}`;
    fns.set(`${stage} | ${fn}`, (fns.get(`${stage} | ${fn}`) ?? 0) + w);
    total += w;
  }
  const pct = (x: number) => `${((100 * x) / total).toFixed(1).padStart(5)} %`;
  console.log(`${basename(file)}: ${(total / 1e6).toFixed(2)} s busy in the busiest ${windowS} s`);
  const ranked = [...fns].sort((a, b) => b[1] - a[1]);
  for (const [s, w] of [...stages].sort((a, b) => b[1] - a[1])) {
    if (w / total < 0.005) continue;
    console.log(`  ${pct(w)}  ${s}`);
    // Its top functions by self time.
    for (const [f, fw] of ranked.filter(([k]) => k.startsWith(`${s} | `)).slice(0, perStage)) console.log(`      ${pct(fw)}  ${f.slice(s.length + 3)}`);
  }
  console.log(`  top self time:`);
  for (const [f, w] of ranked.slice(0, top)) console.log(`  ${pct(w)}  ${f}`);
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { window: { type: "string", default: "10" }, top: { type: "string", default: "25" }, "per-stage": { type: "string", default: "4" }, activities: { type: "boolean", default: false } },
});
for (const f of positionals) await summarize(f, Number(values.window), Number(values.top), Number(values["per-stage"]));
