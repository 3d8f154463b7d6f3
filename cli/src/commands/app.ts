import { create } from "@bufbuild/protobuf";
import { Errors } from "@farm/shared/errors";
import { CliError } from "../cli-error.js";
import { DeviceService, DeviceTargetSchema } from "@farm/shared/gen/farm/v1/device_service_pb";
import { intFlag, parseFlags, stringFlag } from "../args.js";
import { serviceClient } from "../client.js";
import { deviceOptions, type Command, type CommandGroup } from "../command.js";
import { clientSession } from "../session.js";

function target(ctx: { env: NodeJS.ProcessEnv }, parsed: ReturnType<typeof parseFlags>) {
  const serial = stringFlag(parsed, "device") ?? ctx.env["FARM_DEVICE"];
  if (!serial) throw new CliError(Errors.INVALID_ARGUMENT, "--device SERIAL (or FARM_DEVICE) is required", "device");
  return create(DeviceTargetSchema, { serial, agent: stringFlag(parsed, "agent") ?? "" });
}

const endpoint: Command = {
  name: "endpoint",
  summary: "Find and verify an app's SDK endpoint (or WebDriverAgent on iOS) on a device",
  usage: "farm app endpoint --device SERIAL (--package PKG | --bundle-id ID [--wda-runner RUNNER_ID])",
  options: { ...deviceOptions, package: { type: "string" }, "bundle-id": { type: "string" }, "wda-runner": { type: "string" } },
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const app = stringFlag(parsed, "package") ?? stringFlag(parsed, "bundle-id") ?? "";
    const wdaRunner = stringFlag(parsed, "wda-runner") ?? "";
    if (!app && !wdaRunner) throw new CliError(Errors.INVALID_ARGUMENT, "--package (Android) or --bundle-id (iOS) is required", "package");
    const t = target(ctx, parsed);
    const session = clientSession(ctx, parsed);
    const res = await serviceClient(DeviceService, session.config).getAppEndpoint({ target: t, app: wdaRunner && !app ? wdaRunner : app, wdaRunner }, { timeoutMs: session.timeoutMs });
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
      ].join("\n"),
    );
    return 0;
  },
};

const removeForward: Command = {
  name: "remove-forward",
  summary: "Remove an adb forward on the agent's host, checking it belongs to the device",
  usage: "farm app remove-forward --device SERIAL --port N",
  options: { ...deviceOptions, port: { type: "string" } },
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const port = intFlag(parsed, "port", 1, 65_535);
    if (port === undefined) throw new CliError(Errors.INVALID_ARGUMENT, "--port is required", "port");
    const t = target(ctx, parsed);
    const session = clientSession(ctx, parsed);
    await serviceClient(DeviceService, session.config).removeAppForward({ target: t, port }, { timeoutMs: session.timeoutMs });
    ctx.printer.result({ removed: `tcp:${port}`, serial: t.serial }, () => `removed forward tcp:${port} of ${t.serial}`);
    return 0;
  },
};

export const appGroup: CommandGroup = {
  name: "app",
  summary: "App SDK and WebDriverAgent endpoints: endpoint, remove-forward",
  commands: [endpoint, removeForward],
};
