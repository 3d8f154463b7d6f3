/**
 * Streaming from the coordinator to a client: a 100 MiB blob downloaded
 * with the client library the CLI uses (size and sha256 checked, written
 * to a file) against a plain loopback TCP copy of the same bytes into a
 * file, each received by its own process, interleaved, same run. Reports
 * throughput, the ratio (target >= 0.5), and the peak RSS of every process
 * involved (memory must stay bounded whatever the size).
 *
 *   node test/dist/bench/blob-transfer.js [--mib 100] [--runs 3]
 */
import { fork, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { readFile, rm, writeFile } from "node:fs/promises";
import { createServer, connect, type AddressInfo } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { performance } from "node:perf_hooks";
import { pipeline } from "node:stream/promises";
import { createClient } from "@connectrpc/connect";
import { downloadFile, uploadFile } from "@farm/cli/blob-client";
import { farmTransport } from "@farm/shared/farm-transport";
import { BlobService } from "@farm/shared/gen/farm/v1/blob_service_pb";
import { startLab } from "../support/lab.js";
import { emitReport, round } from "./bench-report.js";
import { median, memoryMiB } from "./proc-stats.js";

const { values } = parseArgs({
  options: {
    mib: { type: "string", default: "100" },
    runs: { type: "string", default: "3" },
    // Child modes: receive one blob, or one TCP stream, into a file; report ms and peak RSS.
    "get-blob": { type: "string" },
    "get-tcp": { type: "string" },
    url: { type: "string" },
    token: { type: "string" },
    file: { type: "string" },
  },
});
const MIB = Number(values.mib);
const RUNS = Number(values.runs);

async function child(): Promise<void> {
  const file = values.file as string;
  const t = performance.now();
  if (values["get-blob"]) {
    const client = createClient(BlobService, farmTransport({ url: values.url as string, token: values.token as string }));
    await downloadFile(client, values["get-blob"], file);
  } else {
    const socket = connect({ host: "127.0.0.1", port: Number(values["get-tcp"]) });
    await pipeline(socket, createWriteStream(file, { mode: 0o600 }));
  }
  process.send?.({ ms: performance.now() - t, peakRss: memoryMiB(process.pid).peakRss });
}

function receive(args: string[]): Promise<{ ms: number; peakRss: number }> {
  const proc: ChildProcess = fork(fileURLToPath(import.meta.url), args, { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  return new Promise((resolve, reject) => {
    let got: { ms: number; peakRss: number } | undefined;
    proc.once("message", (m) => (got = m as { ms: number; peakRss: number }));
    proc.once("exit", (code) => (got ? resolve(got) : reject(new Error(`receiver exited with ${code}`))));
  });
}

async function main(): Promise<void> {
  const lab = await startLab("bench-blob", { logLevel: "info" });
  const source = join(lab.dir.path, "source.bin");
  await writeFile(source, randomBytes(MIB * 1024 * 1024));
  const tcp = createServer((socket) => void pipeline(createReadStream(source), socket).catch(() => undefined));
  await new Promise<void>((r) => tcp.listen(0, "127.0.0.1", r));
  try {
    const token = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
    const url = String(lab.standalone.ready["url"]);
    const client = createClient(BlobService, farmTransport({ url, token }));
    const farm: number[] = [];
    const plain: number[] = [];
    let clientPeak = 0;
    let tcpPeak = 0;
    for (let i = 0; i < RUNS; i++) {
      const blobId = await uploadFile(client, source);
      const out = join(lab.dir.path, `out-${i}`);
      const f = await receive(["--get-blob", blobId, "--url", url, "--token", token, "--file", out]);
      await rm(out);
      const p = await receive(["--get-tcp", String((tcp.address() as AddressInfo).port), "--file", out]);
      await rm(out);
      farm.push(f.ms);
      plain.push(p.ms);
      clientPeak = Math.max(clientPeak, f.peakRss);
      tcpPeak = Math.max(tcpPeak, p.peakRss);
    }
    const mibps = (xs: number[]) => MIB / (median(xs) / 1000);
    const ratio = mibps(farm) / mibps(plain);
    const coordinatorPeak = memoryMiB(lab.standalone.pid).peakRss;
    console.log(`${MIB} MiB from the coordinator to a client process, median of ${RUNS}`);
    console.log(`  farm download (client library, checked, to a file)  ${mibps(farm).toFixed(0)} MiB/s`);
    console.log(`  plain loopback TCP copy to a file                    ${mibps(plain).toFixed(0)} MiB/s`);
    console.log(`  ratio ${ratio.toFixed(2)} (target >= 0.5)`);
    console.log(`  peak RSS: farm client ${clientPeak.toFixed(0)} MiB, TCP client ${tcpPeak.toFixed(0)} MiB, standalone (coordinator + agent, which also took the uploads) ${coordinatorPeak.toFixed(0)} MiB`);
    emitReport(
      "blob-transfer",
      [
        { measure: `${MIB} MiB blob coordinator -> client vs TCP copy`, instant: `${round(ratio, 2)}x (${mibps(farm).toFixed(0)} MiB/s)`, realistic: null, target: ">= 0.5x", pass: ratio >= 0.5 },
        // Both receivers are this script (same modules loaded): bounded means the download holds far less than the file.
        {
          measure: "  peak RSS client / TCP client / standalone",
          instant: `${clientPeak.toFixed(0)} / ${tcpPeak.toFixed(0)} / ${coordinatorPeak.toFixed(0)} MiB`,
          realistic: null,
          target: "client <= TCP client + 32 MiB",
          pass: clientPeak <= tcpPeak + 32,
        },
      ],
      { mib: MIB, farmMiBps: round(mibps(farm), 1), tcpMiBps: round(mibps(plain), 1), ratio: round(ratio, 3), clientPeakRssMiB: round(clientPeak, 1), tcpClientPeakRssMiB: round(tcpPeak, 1), standalonePeakRssMiB: round(coordinatorPeak, 1) },
    );
  } finally {
    tcp.close();
    await lab.stop();
  }
}

if (values["get-blob"] || values["get-tcp"]) {
  await child();
  process.exit(0);
} else {
  await main();
  process.exit(0);
}
