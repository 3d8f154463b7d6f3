import { Errors } from "@farm/shared/errors";
import { CliError } from "../cli-error.js";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { allPages } from "@farm/client/all-pages";
import { serviceClient } from "@farm/client/transport";
import { clientSession } from "../session.js";
import type { labelListOptions, labelRmOptions, labelSetOptions } from "../tree/device-commands.js";
import type { Action } from "../tree/spec.js";

/** Parses k=v words into a label map. */
export function parseLabels(words: readonly string[], field = "label"): Record<string, string> {
  const out: Record<string, string> = {};
  for (const w of words) {
    const eq = w.indexOf("=");
    if (eq <= 0) throw new CliError(Errors.INVALID_ARGUMENT, `labels are key=value, got "${w}"`, field);
    out[w.slice(0, eq)] = w.slice(eq + 1);
  }
  return out;
}

/** `farm device label set SERIAL key=value...`: labels belong to the physical device. */
export const setLabels: Action<typeof labelSetOptions> = async (input) => {
  const [serial, ...pairs] = input.args as [string, ...string[]];
  const labels = parseLabels(pairs);
  const session = clientSession(input);
  const res = await serviceClient(LeaseService, session.config).setDeviceLabels({ serial, labels }, { timeoutMs: session.timeoutMs });
  input.ctx.printer.result({ physicalId: res.physicalId, labels: res.labels }, () => `${res.physicalId}: ${Object.entries(res.labels).map(([k, v]) => `${k}=${v}`).join(" ")}`);
  return 0;
};

export const removeLabel: Action<typeof labelRmOptions> = async (input) => {
  const [serial, key] = input.args as [string, string];
  const session = clientSession(input);
  const res = await serviceClient(LeaseService, session.config).removeDeviceLabel({ serial, key }, { timeoutMs: session.timeoutMs });
  input.ctx.printer.result({ physicalId: res.physicalId, labels: res.labels }, () => `${res.physicalId}: ${Object.entries(res.labels).map(([k, v]) => `${k}=${v}`).join(" ") || "(no labels)"}`);
  return 0;
};

export const listLabels: Action<typeof labelListOptions> = async (input) => {
  const session = clientSession(input);
  const client = serviceClient(LeaseService, session.config);
  const devices = await allPages(async (page) => {
    const res = await client.listDeviceLabels(page, { timeoutMs: session.timeoutMs });
    return { items: res.devices, nextPageToken: res.nextPageToken };
  });
  input.ctx.printer.result(
    { devices: devices.map((d) => ({ physicalId: d.physicalId, labels: d.labels })) },
    () => devices.length === 0 ? "no labelled devices" : devices.map((d) => `${d.physicalId}: ${Object.entries(d.labels).map(([k, v]) => `${k}=${v}`).join(" ")}`).join("\n"),
  );
  return 0;
};
