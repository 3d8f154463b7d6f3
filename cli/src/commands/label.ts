import { Errors } from "@farm/shared/errors";
import { CliError } from "../cli-error.js";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { parseFlags } from "../args.js";
import { serviceClient } from "../client.js";
import { clientOptions, type Command, type CommandGroup } from "../command.js";
import { clientSession } from "../session.js";

/** Parses k=v words into a label map. */
export function parseLabels(words: string[], field = "label"): Record<string, string> {
  const out: Record<string, string> = {};
  for (const w of words) {
    const eq = w.indexOf("=");
    if (eq <= 0) throw new CliError(Errors.INVALID_ARGUMENT, `labels are key=value, got "${w}"`, field);
    out[w.slice(0, eq)] = w.slice(eq + 1);
  }
  return out;
}

const set: Command = {
  name: "set",
  summary: "Set labels on a device (they belong to the physical device)",
  usage: "farm device label set SERIAL key=value...",
  options: clientOptions,
  positionals: true,
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options, true);
    const [serial, ...pairs] = parsed.positionals;
    if (!serial || pairs.length === 0) throw new CliError(Errors.INVALID_ARGUMENT, "expected SERIAL key=value...", "label");
    const session = clientSession(ctx, parsed);
    const res = await serviceClient(LeaseService, session.config).setDeviceLabels({ serial, labels: parseLabels(pairs) }, { timeoutMs: session.timeoutMs });
    ctx.printer.result({ physicalId: res.physicalId, labels: res.labels }, () => `${res.physicalId}: ${Object.entries(res.labels).map(([k, v]) => `${k}=${v}`).join(" ")}`);
    return 0;
  },
};

const rm: Command = {
  name: "rm",
  summary: "Remove a label from a device",
  usage: "farm device label rm SERIAL KEY",
  options: clientOptions,
  positionals: true,
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options, true);
    const [serial, key, ...extra] = parsed.positionals;
    if (!serial || !key || extra.length > 0) throw new CliError(Errors.INVALID_ARGUMENT, "expected SERIAL KEY", "label");
    const session = clientSession(ctx, parsed);
    const res = await serviceClient(LeaseService, session.config).removeDeviceLabel({ serial, key }, { timeoutMs: session.timeoutMs });
    ctx.printer.result({ physicalId: res.physicalId, labels: res.labels }, () => `${res.physicalId}: ${Object.entries(res.labels).map(([k, v]) => `${k}=${v}`).join(" ") || "(no labels)"}`);
    return 0;
  },
};

export const labelGroup: CommandGroup = { name: "label", summary: "Device labels: set, rm", commands: [set, rm] };
