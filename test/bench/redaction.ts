/**
 * Redaction throughput on the agent: a 10 MiB synthetic logcat with 20
 * secrets (each appearing dozens of times, some percent-, JSON- or
 * HTML-encoded, some inside `Authorization: Basic` tokens) through
 * `text()` and `stream()` (64 KiB chunks), in MiB/s, against baselines
 * from the same run over the same bytes: a UTF-8 decode
 * (`Buffer.toString`), the naive alternative of one `indexOf` pass per
 * secret (literal values only, no encoded forms, nothing replaced), and a
 * PassThrough stream. Median of N runs after a warm-up. Checks that no
 * secret survives; otherwise prints, asserts nothing.
 *
 *   node test/dist/bench/redaction.js [--mib 10] [--runs 5]
 */
import { PassThrough, Readable, type Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { createRedactor, REDACTION_MASK } from "@farm/shared/redaction/redactor";
import { emitReport } from "./bench-report.js";
import { median } from "./proc-stats.js";

const { values } = parseArgs({ options: { mib: { type: "string", default: "10" }, runs: { type: "string", default: "5" } } });
const MIB = Number(values.mib);
const RUNS = Number(values.runs);
const CHUNK = 64 * 1024;

/** Deterministic PRNG: the same log every run. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const next = rng(42);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)] as T;
const word = (n: number, alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") => Array.from({ length: n }, () => pick([...alphabet])).join("");

// Shapes secrets take in CI: API keys, JWT-ish tokens, passwords with punctuation, UUIDs, a non-ASCII one.
const SECRETS = [
  ...Array.from({ length: 5 }, () => `sk_live_${word(24)}`),
  ...Array.from({ length: 4 }, () => `eyJ${word(20)}.${word(30)}.${word(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")}`),
  ...Array.from({ length: 5 }, () => `${word(6)}&${word(3)} "${word(4)}"/${word(3)}+!`),
  ...Array.from({ length: 4 }, () => `${word(8, "0123456789abcdef")}-${word(4, "0123456789abcdef")}-${word(4, "0123456789abcdef")}-${word(12, "0123456789abcdef")}`),
  `pässwört-${word(8)}`,
  `ghp_${word(36)}`,
];

const TAGS = ["ActivityManager", "OkHttp", "chromium", "WindowManager", "App", "NetworkSecurityConfig", "InputMethodManager"];
const PLAIN = [
  "Start proc 4321:com.example.app/u0a123 for activity {com.example.app/.MainActivity}",
  "Displayed com.example.app/.MainActivity: +412ms",
  "--> GET https://api.example.com/v1/items?page=2 http/1.1",
  "<-- 200 OK https://api.example.com/v1/items?page=2 (183ms, 2048-byte body)",
  "[INFO:CONSOLE(12)] \"render done\", source: https://app.example.com/main.js (12)",
  "Focus changed to Window{a1b2c3 u0 com.example.app/com.example.app.MainActivity}",
  "No Network Security Config specified, using platform default",
];

function secretLine(): string {
  const s = pick(SECRETS);
  switch (Math.floor(next() * 6)) {
    case 0:
      return `--> POST https://api.example.com/login?token=${encodeURIComponent(s)}&v=2`;
    case 1:
      return `request body {"user":"ci","password":${JSON.stringify(s)}}`;
    case 2:
      return `<input type="hidden" value="${s.replace(/&/g, "&amp;").replace(/"/g, "&quot;")}">`;
    case 3:
      return `Authorization: Basic ${Buffer.from(`ci-bot:${s}`).toString("base64")}`;
    default:
      return `exec: am broadcast -a com.example.SET_TOKEN --es token '${s}'`;
  }
}

function syntheticLog(bytes: number): string {
  const lines: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const ms = i * 7;
    const stamp = `01-02 ${String(10 + Math.floor(ms / 3_600_000) % 14).padStart(2, "0")}:${String(Math.floor(ms / 60_000) % 60).padStart(2, "0")}:${String(Math.floor(ms / 1000) % 60).padStart(2, "0")}.${
      String(ms % 1000).padStart(3, "0")
    }`;
    // About one line in 400 carries a secret: dozens of occurrences of each over 10 MiB.
    const msg = next() < 1 / 400 ? secretLine() : pick(PLAIN);
    const line = `${stamp}  ${1000 + (i % 900)}  ${2000 + (i % 37)} ${pick(["V", "D", "I", "W", "E"])} ${pick(TAGS)}: ${msg}\n`;
    lines.push(line);
    size += Buffer.byteLength(line);
  }
  return lines.join("");
}

function timed(runs: number, fn: () => void): number {
  fn(); // warm-up: compiles the regex, JITs the loop
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    fn();
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

async function timedAsync(runs: number, fn: () => Promise<void>): Promise<number> {
  await fn();
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await fn();
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

async function drain(chunks: Buffer[], transform: () => Transform, sink: (b: Buffer) => void): Promise<void> {
  await pipeline(Readable.from(chunks), transform(), async (source: AsyncIterable<Buffer>) => {
    for await (const b of source) sink(b);
  });
}

async function main(): Promise<void> {
  const log = syntheticLog(MIB * 1024 * 1024);
  const bytes = Buffer.from(log);
  const mib = bytes.length / (1024 * 1024);
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += CHUNK) chunks.push(bytes.subarray(at, at + CHUNK));

  let t0 = performance.now();
  const redactor = createRedactor({ secrets: SECRETS });
  const buildMs = performance.now() - t0;

  // Correctness on the bench data: every secret and every encoded use gone.
  const out = redactor.text(log);
  const leaked = SECRETS.filter((s) => out.includes(s) || out.includes(encodeURIComponent(s)) || out.includes(JSON.stringify(s).slice(1, -1)));
  if (leaked.length > 0) throw new Error(`${leaked.length} secrets survived redaction`);
  const masks = out.split(REDACTION_MASK).length - 1;
  const streamed: Buffer[] = [];
  await drain(chunks, () => redactor.stream(), (b) => streamed.push(b));
  if (Buffer.concat(streamed).toString() !== out) throw new Error("stream() and text() disagree");

  const textMs = timed(RUNS, () => void redactor.text(log));
  const decodeMs = timed(RUNS, () => void bytes.toString("utf8"));
  let found = 0;
  const indexOfMs = timed(RUNS, () => {
    for (const s of SECRETS) for (let at = log.indexOf(s); at >= 0; at = log.indexOf(s, at + s.length)) found++;
  });
  const discard = () => {};
  const streamMs = await timedAsync(RUNS, () => drain(chunks, () => redactor.stream(), discard));
  const passMs = await timedAsync(RUNS, () => drain(chunks, () => new PassThrough(), discard));

  const rate = (ms: number) => mib / (ms / 1000);
  const report = {
    mib: Number(mib.toFixed(2)),
    secrets: SECRETS.length,
    masks,
    literalOccurrences: found / (RUNS + 1),
    buildMs: Number(buildMs.toFixed(1)),
    textMiBps: Math.round(rate(textMs)),
    streamMiBps: Math.round(rate(streamMs)),
    utf8DecodeMiBps: Math.round(rate(decodeMs)),
    indexOfMiBps: Math.round(rate(indexOfMs)),
    passThroughMiBps: Math.round(rate(passMs)),
    textVsDecode: Number((textMs / decodeMs).toFixed(2)),
    textVsIndexOf: Number((textMs / indexOfMs).toFixed(2)),
    streamVsPassThrough: Number((streamMs / passMs).toFixed(1)),
  };
  console.log(`redaction of a ${mib.toFixed(1)} MiB synthetic logcat, ${SECRETS.length} secrets (${masks} masks; indexOf finds ${report.literalOccurrences} literal uses), median of ${RUNS}:`);
  console.log(`  text()           ${report.textMiBps} MiB/s (${textMs.toFixed(0)} ms)   ratio to UTF-8 decode ${(textMs / decodeMs).toFixed(2)}x, to ${SECRETS.length} indexOf passes ${(textMs / indexOfMs).toFixed(2)}x`);
  console.log(`  stream() 64 KiB  ${report.streamMiBps} MiB/s (${streamMs.toFixed(0)} ms)   ratio to PassThrough ${(streamMs / passMs).toFixed(1)}x, to text() ${(streamMs / textMs).toFixed(2)}x`);
  console.log(`  baselines        UTF-8 decode ${report.utf8DecodeMiBps} MiB/s, ${SECRETS.length} indexOf passes ${report.indexOfMiBps} MiB/s, PassThrough ${report.passThroughMiBps} MiB/s`);
  console.log(`  createRedactor   ${report.buildMs} ms`);
  emitReport("redaction", [
    { measure: "redaction text()", instant: `${report.textMiBps} MiB/s`, realistic: null, target: "", pass: null },
    { measure: "redaction stream()", instant: `${report.streamMiBps} MiB/s`, realistic: null, target: "", pass: null },
  ], report);
}

await main();
