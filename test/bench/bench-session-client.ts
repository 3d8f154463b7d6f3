import { readFile } from "node:fs/promises";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { noDelaySessionOptions } from "@farm/shared/no-delay";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { SessionService } from "@farm/shared/gen/farm/v1/session_service_pb";
import type { Lab } from "../support/lab.js";

/**
 * Persistent clients of a lab's standalone for the session benches, as the
 * admin, holding a lease on one phone. `headers` are sent with every call
 * while set (x-farm-session, x-farm-capture), so a bench switches between a
 * plain and a recorded action without a new connection.
 */
export async function benchSessionClient(lab: Lab, serial: string) {
  const admin = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
  const headers: Record<string, string> = {};
  const auth: Interceptor = (next) => (req) => {
    req.header.set("authorization", `Bearer ${admin}`);
    for (const [k, v] of Object.entries(headers)) if (v) req.header.set(k, v);
    return next(req);
  };
  const transport = createGrpcTransport({ baseUrl: String(lab.standalone.ready["url"]), interceptors: [auth], nodeOptions: noDelaySessionOptions() });
  headers["x-farm-lease"] = (await createClient(LeaseService, transport).acquireLease({ selector: { serial }, ttlMs: 3_600_000 })).token;
  const sessions = createClient(SessionService, transport);
  return {
    devices: createClient(DeviceService, transport),
    sessions,
    headers,
    /** A new session on the phone, by id. */
    start: async (opts: { name: string; ocr?: boolean }) => (await sessions.startSession({ target: { serial }, name: opts.name, ocr: opts.ocr ?? false })).session?.sessionId ?? "",
  };
}
