import { parseArgs } from "node:util";
import { clearFaults, controlRequest, runAction, setFaults } from "./control/control-client.js";

/** `key=value` → typed value: numbers, true/false, null, comma lists for hangServices and uninstallRefused, else the string. */
export function parseAssignment(text: string): [string, unknown] {
  const eq = text.indexOf("=");
  if (eq <= 0) throw new Error(`expected key=value, got ${JSON.stringify(text)}`);
  const key = text.slice(0, eq);
  const raw = text.slice(eq + 1);
  if (key === "hangServices" || key === "uninstallRefused") return [key, raw === "null" ? null : raw.split(",")];
  if (raw === "true" || raw === "false") return [key, raw === "true"];
  if (raw === "null") return [key, null];
  if (raw !== "" && /^-?[0-9.]+$/.test(raw)) return [key, Number(raw)];
  return [key, raw];
}

/** `status`, `fault`, `action` subcommands: talk to a running devsim's control API. */
export async function runControlCommand(command: string, argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values, positionals } = parseArgs({ args: [...argv], options: { control: { type: "string" }, clear: { type: "boolean" } }, allowPositionals: true, strict: true });
  const url = values.control ?? env["DEVSIM_CONTROL"];
  if (!url) throw new Error("no control API: pass --control URL or set DEVSIM_CONTROL (devsim prints it at start)");
  let result: unknown;
  if (command === "status") {
    result = await controlRequest(url, "GET", "/devices");
  } else {
    const [serial, ...rest] = positionals;
    if (!serial) throw new Error(`${command}: name the device (adb serial or ro.serialno)`);
    if (command === "fault") {
      result = values.clear ? await clearFaults(url, serial) : await setFaults(url, serial, Object.fromEntries(rest.map(parseAssignment)));
    } else {
      const [action, ...params] = rest;
      if (!action) throw new Error("action: name the action (vanish, restore, reboot, …)");
      result = await runAction(url, serial, { action, ...Object.fromEntries(params.map(parseAssignment)) });
    }
  }
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  return 0;
}
