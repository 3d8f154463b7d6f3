import { hotDeviceJson } from "@farm/shared/hot-device-json";
import { encodeListDevicesRequest } from "@farm/shared/hot-shell-codec";
import { readPlainPage } from "@farm/shared/list-devices-read";
import { printDevices } from "../commands/devices-table.js";
import type { deviceListOptions } from "../tree/device-commands.js";
import type { Action } from "../tree/spec.js";
import { oneCall, plainAnswer } from "./one-call.js";
import { logVerbose, oneCallOff, planCall } from "./one-call-plan.js";

/** The largest page the coordinator serves (client/src/all-pages.ts PAGE_SIZE). */
const PAGE_SIZE = 1000;

/**
 * `farm devices` as one request (one-call.ts), when the listing is one
 * plain page: the same table or JSON as commands/devices.ts, whose full
 * path runs instead for anything else (a second page, an error, an answer
 * the own reader leaves to protobuf-es). ListDevices only reads, so asking
 * again that way changes nothing; what is printed is the full path's own.
 */
export const hotDevices: Action<typeof deviceListOptions> = async (input) => {
  const full = async () => (await import("../commands/devices.js")).listDevices(input);
  if (oneCallOff(input.ctx.env)) return full();
  const message = encodeListDevicesRequest({ agent: input.opts.agent ?? "", state: input.opts.state ?? "", pageSize: PAGE_SIZE, pageToken: "" });
  // serviceClient's calls carry no lease or session.
  const plan = planCall(input, "/farm.v1.RegistryService/ListDevices", message, {});
  if (!plan) return full();
  const started = performance.now();
  const outcome = await oneCall(plan.request);
  const bytes = outcome.sent ? plainAnswer(outcome.events) : undefined;
  const page = bytes && readPlainPage(bytes);
  if (!page || page.nextPageToken !== "") return full();
  // Every device's JSON first: one toJson would refuse sends the whole listing to the full path.
  const json = new Map<object, Record<string, unknown>>();
  for (const d of page.devices) {
    const j = hotDeviceJson(d);
    if (!j) return full();
    json.set(d, j);
  }
  logVerbose(plan, "farm.v1.RegistryService/ListDevices", started);
  printDevices(input.ctx, page.devices, (d) => json.get(d));
  return 0;
};
