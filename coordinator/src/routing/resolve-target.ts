import { create } from "@bufbuild/protobuf";
import { DeviceTargetSchema, type DeviceTarget } from "@farm/shared/gen/farm/v1/device_service_pb";
import type { Registry } from "../registry/registry.js";

/**
 * The request with its device target's serial as an agent reports it: a
 * physical id or a unique prefix of one (Registry.serialFor) becomes the
 * phone's serial before the call is checked, logged or sent, so the agent,
 * the activity log and a request id's fingerprint all see the serial.
 */
export function withReportedSerial<R extends { target?: DeviceTarget | undefined }>(registry: Registry, req: R): R {
  const given = req.target?.serial ?? "";
  if (given === "") return req;
  const serial = registry.serialFor(given, req.target?.agent ?? "");
  if (serial === given) return req;
  return { ...req, target: create(DeviceTargetSchema, { serial, agent: req.target?.agent ?? "", requestId: req.target?.requestId ?? "" }) };
}
