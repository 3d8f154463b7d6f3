#!/usr/bin/env node
// `npm run devsim -- --devices N`: simulated devices for manual runs and scripts.
import { USAGE, parseCliOptions, type CliOptions } from "./cli-options.js";
import { runControlCommand } from "./control-cli.js";
import { loadScenario } from "./control/scenario.js";
import { startDevsim, type Devsim } from "./host/devsim.js";

function formatTable(sim: Devsim): string {
  const rows = sim.devices.map(({ serial, port, device }) => [serial, String(port), device.serialno, device.model]);
  const header = ["SERIAL", "PORT", "SERIALNO", "MODEL"];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
  return [header, ...rows].map((row) => row.map((cell, column) => cell.padEnd(widths[column]!)).join("  ").trimEnd()).join("\n");
}

async function main(): Promise<number> {
  const [first, ...rest] = process.argv.slice(2);
  if (first === "status" || first === "fault" || first === "action") {
    try {
      return await runControlCommand(first, rest, process.env);
    } catch (error) {
      process.stderr.write(`devsim ${first}: ${(error as Error).message}\n`);
      return 1;
    }
  }
  let options: CliOptions;
  try {
    options = parseCliOptions(process.argv.slice(2), process.env, Boolean(process.stdout.isTTY));
  } catch (error) {
    process.stderr.write(`devsim: ${(error as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  if (options.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }

  const scenario = options.scenario ? await loadScenario(options.scenario) : undefined;
  const sim = await startDevsim({
    devices: options.devices,
    adbPort: options.adbPort,
    connect: options.connect,
    host: options.host,
    control: true,
    ...(scenario ? { scenario } : {}),
    ...(options.latency ? { latency: options.latency } : {}),
    log: (message) => process.stderr.write(`devsim: ${message}\n`),
  });
  if (options.format === "json") {
    for (const { serial, port, device } of sim.devices) {
      process.stdout.write(`${JSON.stringify({ serial, port, serialno: device.serialno, model: device.model, control: sim.controlUrl })}\n`);
    }
  } else {
    process.stdout.write(`${formatTable(sim)}\n`);
  }
  const where = options.connect ? `connected to the adb server on port ${options.adbPort}` : "listening (not connected)";
  process.stderr.write(`devsim: control API at ${sim.controlUrl}\n`);
  process.stderr.write(`devsim: ${sim.devices.length} device(s) ${where}; stop with Ctrl-C\n`);

  return new Promise<number>((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        // A second signal: give up on a clean stop.
        process.exit(130);
      }
      stopping = true;
      process.stderr.write(`devsim: ${signal}, disconnecting devices\n`);
      sim.stop().then(
        () => resolve(0),
        (error: unknown) => {
          process.stderr.write(`devsim: stop failed: ${(error as Error).message}\n`);
          resolve(1);
        },
      );
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
  });
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`devsim: ${(error as Error).stack ?? String(error)}\n`);
    process.exitCode = 1;
  },
);
