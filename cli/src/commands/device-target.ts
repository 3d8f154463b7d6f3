import { create } from "@bufbuild/protobuf";
import { Errors } from "@farm/shared/errors";
import { DeviceService, DeviceTargetSchema, type DeviceTarget } from "@farm/shared/gen/farm/v1/device_service_pb";
import { CliError } from "../cli-error.js";
import { Device, type CallOpts } from "@farm/client/device";
import { failureAsSent } from "@farm/client/to-farm-error";
import { noTokenError, serviceClient } from "@farm/client/transport";
import { Wire, type CallScope } from "@farm/client/wire";
import type { ConnectionValues, ValueSource } from "../options/resolve.js";
import { clientSession, type ClientSession } from "../session.js";
import type { CommandContext } from "../tree/spec.js";

/** The resolved options of a command that acts on one device (options/common-options.ts deviceOptions). */
export interface DeviceInput {
  opts: ConnectionValues & {
    timeout: number;
    device: string | undefined;
    agent: string | undefined;
    lease: string | undefined;
    requestId: string | undefined;
    capture?: string | undefined;
    logPackage?: string | undefined;
    logFilter?: string | undefined;
  };
  sources: { coordinator?: ValueSource | undefined };
  ctx: CommandContext;
}

/** --device (or FARM_DEVICE, set by `farm lease run`), with --agent and --request-id. */
export function deviceTarget(opts: DeviceInput["opts"]): DeviceTarget {
  if (!opts.device) throw new CliError(Errors.INVALID_ARGUMENT, "--device is required (or FARM_DEVICE)", "device");
  return create(DeviceTargetSchema, { serial: opts.device, agent: opts.agent ?? "", requestId: opts.requestId ?? "" });
}

/**
 * What a device command's calls present: --lease (or FARM_LEASE), and
 * FARM_SESSION (set by `farm lease run --session`, or exported after `farm
 * session start`): the coordinator records its actions as steps of that
 * session, with --capture's evidence.
 */
function deviceScope(input: DeviceInput): CallScope {
  const sessionId = input.ctx.env["FARM_SESSION"] || undefined;
  const o = input.opts;
  for (const [flag, v] of [["capture", o.capture], ["log-package", o.logPackage], ["log-filter", o.logFilter]] as const) {
    if (v && !sessionId) throw new CliError(Errors.INVALID_ARGUMENT, `--${flag} records evidence in a session: set FARM_SESSION (farm session start, or farm lease run --session)`, flag);
  }
  return { lease: o.lease || undefined, session: sessionId, capture: o.capture || undefined, logPackage: o.logPackage || undefined, logFilter: o.logFilter || undefined };
}

/** A device client with the command's lease, session and capture (deviceScope). */
export function deviceClient(input: DeviceInput): { client: ReturnType<typeof serviceClient<typeof DeviceService>>; session: ClientSession } {
  const session = clientSession(input);
  return { client: serviceClient(DeviceService, session.config, deviceScope(input)), session };
}

/**
 * The command's phone as @farm/client's Device (the library's calls, one
 * client code path), on one connection the run closes at its end. Checked
 * in deviceClient's order: connection options, session flags, token, then
 * --device. `call` passes --request-id to each call.
 */
export function libraryDevice(input: DeviceInput): { device: Device; call: CallOpts; session: ClientSession } {
  const session = clientSession(input);
  const scope = deviceScope(input);
  const wire = libraryWire(session);
  const target = deviceTarget(input.opts);
  return { device: new Device(wire, target.serial, target.agent, scope), call: { requestId: target.requestId || undefined }, session };
}

/** @farm/client's one connection for a command, refused as serviceClient refuses one without a token. */
export function libraryWire(session: ClientSession): Wire {
  if (!session.config.token) throw noTokenError(session.config);
  return new Wire(session.config, session.timeoutMs);
}

/**
 * A library call's failure as the transport raised it: the CLI reports
 * that (its fields named by flag, cli-error-report.ts), as it did when it
 * made the call itself.
 */
export async function asCli<T>(call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (err) {
    throw failureAsSent(err);
  }
}
