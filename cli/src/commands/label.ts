import { Errors } from "@farm/shared/errors";
import { CliError } from "../cli-error.js";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { allPages } from "../all-pages.js";
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

const list: Command = {
  name: "list",
  summary: "Labels of every labelled device, by physical id",
  usage: "farm device label list [--output json|pretty]",
  options: clientOptions,
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const session = clientSession(ctx, parsed);
    const client = serviceClient(LeaseService, session.config);
    const devices = await allPages(async (page) => {
      const res = await client.listDeviceLabels(page, { timeoutMs: session.timeoutMs });
      return { items: res.devices, nextPageToken: res.nextPageToken };
    });
    ctx.printer.result({ devices: devices.map((d) => ({ physicalId: d.physicalId, labels: d.labels })) }, () =>
      devices.length === 0 ? "no labelled devices" : devices.map((d) => `${d.physicalId}: ${Object.entries(d.labels).map(([k, v]) => `${k}=${v}`).join(" ")}`).join("\n"),
    );
    return 0;
  },
};

export const labelGroup: CommandGroup = { name: "label", summary: "Device labels: set, rm, list", commands: [set, rm, list] };
