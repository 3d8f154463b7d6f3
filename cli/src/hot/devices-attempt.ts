import { hotDeviceJson } from "@farm/shared/hot-device-json";
import { encodeListDevicesRequest } from "@farm/shared/hot-shell-codec";
import { readPlainPage } from "@farm/shared/list-devices-read";
import { printDevices } from "../commands/devices-table.js";
import type { deviceListOptions } from "../tree/device-commands.js";
import type { ActionInput } from "../tree/spec.js";
import { oneCall, plainAnswer, type OneCallOutcome } from "./one-call.js";
import { logVerbose, oneCallOff, planCall } from "./one-call-plan.js";
import type { RecordedCall } from "./recorded-call.js";

/** The largest page the coordinator serves (client/src/all-pages.ts PAGE_SIZE). */
const PAGE_SIZE = 1000;

/**
 * `farm devices`' one request, as far as one plain page goes (no dynamic
 * import: lib/one.cjs and lib/hot.cjs share it). `done`: printed;
 * `unplanned`: nothing tried; `called`: the outcome (and its x-request-id)
 * of a call whose answer was anything else, left to the full path.
 */
export type DevicesAttempt =
  | { kind: "done"; code: number }
  | { kind: "unplanned" }
  | { kind: "called"; outcome: OneCallOutcome; requestId: string; started: number };

/** `recorded`: the call lib/one.cjs already made, judged instead of calling again. */
export async function attemptDevices(input: ActionInput<typeof deviceListOptions>, recorded?: RecordedCall): Promise<DevicesAttempt> {
  if (oneCallOff(input.ctx.env)) return { kind: "unplanned" };
  const message = encodeListDevicesRequest({ agent: input.opts.agent ?? "", state: input.opts.state ?? "", pageSize: PAGE_SIZE, pageToken: "" });
  // serviceClient's calls carry no lease or session.
  const plan = planCall(input, "/farm.v1.RegistryService/ListDevices", message, {}, recorded);
  if (!plan) return { kind: "unplanned" };
  const started = recorded?.started ?? performance.now();
  const outcome = recorded?.outcome ?? await oneCall(plan.request);
  const called = { kind: "called", outcome, requestId: plan.requestId, started } as const;
  const bytes = outcome.sent ? plainAnswer(outcome.events) : undefined;
  const page = bytes && readPlainPage(bytes);
  if (!page || page.nextPageToken !== "") return called;
  // Every device's JSON first: one toJson would refuse sends the whole listing to the full path.
  const json = new Map<object, Record<string, unknown>>();
  for (const d of page.devices) {
    const j = hotDeviceJson(d);
    if (!j) return called;
    json.set(d, j);
  }
  logVerbose(plan, "farm.v1.RegistryService/ListDevices", started);
  printDevices(input.ctx, page.devices, (d) => json.get(d));
  return { kind: "done", code: 0 };
}
