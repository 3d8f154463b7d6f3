import { toJson } from "@bufbuild/protobuf";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { DeviceSchema } from "@farm/shared/gen/farm/v1/registry_pb";
import { allPages } from "@farm/client/all-pages";
import { serviceClient } from "@farm/client/transport";
import { printDevices } from "./devices-table.js";
import { clientSession } from "../session.js";
import type { deviceListOptions } from "../tree/device-commands.js";
import type { Action } from "../tree/spec.js";

/** `farm device list` / `farm devices`; -o wide adds manufacturer, ABI, boot id, pin label, last update, quarantine reason and why a phone needs attention. */
export const listDevices: Action<typeof deviceListOptions> = async (input) => {
  const session = clientSession(input);
  const client = serviceClient(RegistryService, session.config);
  const filter = { agent: input.opts.agent ?? "", state: input.opts.state ?? "" };
  // Every page: the coordinator sends at most 1000 devices a call.
  const devices = await allPages(async (page) => {
    const res = await client.listDevices({ ...filter, ...page }, { timeoutMs: session.timeoutMs });
    return { items: res.devices, nextPageToken: res.nextPageToken };
  });
  printDevices(input.ctx, devices, (d) => toJson(DeviceSchema, d, { alwaysEmitImplicit: true }));
  return 0;
};
