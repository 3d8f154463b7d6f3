import { create } from "@bufbuild/protobuf";
import { farmError, Errors } from "@farm/shared/errors";
import { AppEndpointSchema, type AppEndpoint } from "@farm/shared/gen/farm/v1/device_service_pb";
import type { AgentServiceDeps } from "../rpc/service-deps.js";
import { discoverAndroidEndpoint } from "./android-endpoint.js";

/** GetAppEndpoint on this agent: Android through adb, iOS through devicectl when configured. */
export async function appEndpoint(serial: string, app: string, wdaRunner: string, deadlineMs: number, deps: Pick<AgentServiceDeps, "ios" | "ownership" | "evidence">): Promise<AppEndpoint> {
  // The caller's budget, less the way back; no floor, or the answer would come after the caller gave up.
  const timeoutMs = Math.max(0, deadlineMs - Date.now() - 200);
  const ios = deps.ios?.device(serial);
  if (ios) {
    const e = wdaRunner ? await deps.ios!.wdaEndpoint(serial, wdaRunner, timeoutMs) : await deps.ios!.sdkEndpoint(serial, app, timeoutMs);
    return create(AppEndpointSchema, { platform: "ios", kind: wdaRunner ? "wda" : "sdk", app: e.bundleId, runtimeEpoch: e.runtimeEpoch, host: e.host, port: e.port, processId: e.processId, verifiedUnixMs: BigInt(e.verifiedAtMs) });
  }
  if (wdaRunner) throw farmError(Errors.INVALID_ARGUMENT, "WebDriverAgent is iOS only; this serial is an Android device", "wda-runner");
  deps.ownership.requireDevice(serial);
  const e = await discoverAndroidEndpoint(deps.evidence.adb, serial, app, timeoutMs);
  return create(AppEndpointSchema, {
    platform: "android",
    kind: "sdk",
    app: e.packageName,
    runtimeEpoch: e.runtimeEpoch,
    socketName: e.socketName,
    version: e.version,
    host: "127.0.0.1",
    port: e.hostPort,
    forwardCreated: e.forwardCreated,
    verifiedUnixMs: BigInt(e.verifiedAtMs),
  });
}
