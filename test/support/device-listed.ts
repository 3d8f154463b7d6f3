import { createClient } from "@connectrpc/connect";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { WatchService } from "@farm/shared/gen/farm/v1/watch_service_pb";
import type { Device } from "@farm/shared/gen/farm/v1/registry_pb";
import { tokenTransport } from "./in-process-agent.js";

/** Online with an identity: what a test can lease and act on. */
const usable = (d: Device, serial: string) => d.serial === serial && d.state === "device" && (d.properties?.physicalId ?? "") !== "";

/**
 * Resolves once the coordinator lists `serial` online with its identity,
 * waiting on its watch stream (subscribed first, then one read of the list),
 * not by polling a CLI that each time starts a process.
 */
export async function deviceListed(url: string, token: string, serial: string, timeoutMs = 30_000): Promise<Device> {
  const transport = tokenTransport(url, token);
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(new Error(`timed out after ${timeoutMs} ms waiting for ${serial} online in ${url}`)), timeoutMs);
  try {
    for await (const ev of createClient(WatchService, transport).watch({}, { signal: stop.signal })) {
      if (ev.kind.case === "ready") {
        const found = (await createClient(RegistryService, transport).listDevices({ pageSize: 1000 }, { signal: stop.signal })).devices.find((d) => usable(d, serial));
        if (found) return found;
      } else if (ev.kind.case === "device" && usable(ev.kind.value, serial)) {
        return ev.kind.value;
      }
    }
    throw new Error(`the watch stream of ${url} ended before ${serial} was online`);
  } catch (err) {
    throw stop.signal.aborted ? stop.signal.reason : err;
  } finally {
    clearTimeout(timer);
    stop.abort();
  }
}
