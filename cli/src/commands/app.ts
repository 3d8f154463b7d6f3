import { create } from "@bufbuild/protobuf";
import { Errors } from "@farm/shared/errors";
import { DeviceService, DeviceTargetSchema } from "@farm/shared/gen/farm/v1/device_service_pb";
import { CliError } from "../cli-error.js";
import { serviceClient } from "@farm/client/transport";
import { clientSession } from "../session.js";
import type { endpointOptions, removeForwardOptions } from "../tree/app-commands.js";
import type { Action } from "../tree/spec.js";

function target(opts: { device: string | undefined; agent: string | undefined }) {
  if (!opts.device) throw new CliError(Errors.INVALID_ARGUMENT, "--device SERIAL (or FARM_DEVICE) is required", "device");
  return create(DeviceTargetSchema, { serial: opts.device, agent: opts.agent ?? "" });
}

export const endpoint: Action<typeof endpointOptions> = async (input) => {
  const { opts, ctx } = input;
  const app = opts.package ?? opts.bundleId ?? "";
  const wdaRunner = opts.wdaRunner ?? "";
  if (!app && !wdaRunner) throw new CliError(Errors.INVALID_ARGUMENT, "--package (Android) or --bundle-id (iOS) is required", "package");
  const t = target(opts);
  const session = clientSession(input);
  const res = await serviceClient(DeviceService, session.config, { session: ctx.env["FARM_SESSION"] || undefined }).getAppEndpoint({ target: t, app: wdaRunner && !app ? wdaRunner : app, wdaRunner }, { timeoutMs: session.timeoutMs });
  const e = res.endpoint;
  const data = {
    platform: e?.platform,
    kind: e?.kind,
    app: e?.app,
    runtimeEpoch: e?.runtimeEpoch,
    socketName: e?.socketName || null,
    version: e?.version || null,
    host: e?.host,
    port: e?.port,
    url: e ? `http://${e.host.includes(":") ? `[${e.host}]` : e.host}:${e.port}` : null,
    forwardCreated: e?.forwardCreated ?? false,
    processId: e?.processId || null,
    verifiedAt: e ? new Date(Number(e.verifiedUnixMs)).toISOString() : null,
  };
  ctx.printer.result({ endpoint: data }, () =>
    [
      `${data.app} on ${t.serial} (${data.platform} ${data.kind}): runtime ${data.runtimeEpoch}`,
      `  route: ${data.url}${data.socketName ? ` -> localabstract:${data.socketName} (${data.forwardCreated ? "new" : "reused"} adb forward on the agent's host)` : ""}`,
      `  verified ${data.verifiedAt}`,
    ].join("\n"));
  return 0;
};

export const removeForward: Action<typeof removeForwardOptions> = async (input) => {
  const { port } = input.opts;
  if (port === undefined) throw new CliError(Errors.INVALID_ARGUMENT, "--port is required", "port");
  const t = target(input.opts);
  const session = clientSession(input);
  await serviceClient(DeviceService, session.config, { session: input.ctx.env["FARM_SESSION"] || undefined }).removeAppForward({ target: t, port }, { timeoutMs: session.timeoutMs });
  input.ctx.printer.result({ removed: `tcp:${port}`, serial: t.serial }, () => `removed forward tcp:${port} of ${t.serial}`);
  return 0;
};
