import { create } from "@bufbuild/protobuf";
import { Errors } from "@farm/shared/errors";
import { DeviceService, DeviceTargetSchema, type DeviceTarget } from "@farm/shared/gen/farm/v1/device_service_pb";
import { CliError } from "../cli-error.js";
import { serviceClient } from "@farm/client/transport";
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
 * A device client presenting --lease (or FARM_LEASE), and FARM_SESSION
 * (set by `farm lease run --session`, or exported after `farm session
 * start`): the coordinator records its actions as steps of that session.
 */
export function deviceClient(input: DeviceInput): { client: ReturnType<typeof serviceClient<typeof DeviceService>>; session: ClientSession } {
  const session = clientSession(input);
  const sessionId = input.ctx.env["FARM_SESSION"] || undefined;
  const o = input.opts;
  for (const [flag, v] of [["capture", o.capture], ["log-package", o.logPackage], ["log-filter", o.logFilter]] as const) {
    if (v && !sessionId) throw new CliError(Errors.INVALID_ARGUMENT, `--${flag} records evidence in a session: set FARM_SESSION (farm session start, or farm lease run --session)`, flag);
  }
  const capture = { capture: o.capture || undefined, logPackage: o.logPackage || undefined, logFilter: o.logFilter || undefined };
  return { client: serviceClient(DeviceService, session.config, { lease: o.lease || undefined, session: sessionId, ...capture }), session };
}
