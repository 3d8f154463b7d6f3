import { describe, expect, it } from "vitest";
import { DeviceService } from "./gen/farm/v1/device_service_pb.js";
import { VideoService } from "./gen/farm/v1/video_service_pb.js";
import { Health } from "./gen/grpc/health/v1/health_pb.js";
import { Access, methodPath, rulesOf } from "./method-rules.js";

describe("method rules", () => {
  it("reads the rules a method declares in the schema", () => {
    const shell = rulesOf(DeviceService.method.runShell);
    expect(shell.access).toBe(Access.OPERATOR);
    expect(shell.deviceChange).toBe(true);
    expect(shell.readOnly).toBe(false);
    const status = rulesOf(VideoService.method.getVideoStatus);
    expect(status).toMatchObject({ access: Access.VIEWER, deviceChange: false, whileDraining: true, readOnly: true });
    expect(rulesOf(DeviceService.method.getAppEndpoint).leaseHolderOnly).toBe(true);
  });

  it("gives a method without rules the refused default", () => {
    expect(rulesOf(Health.method.check).access).toBe(Access.UNSPECIFIED);
  });

  it("names a method by package, service and method", () => {
    expect(methodPath(DeviceService.method.runShell)).toBe("farm.v1.DeviceService/RunShell");
  });
});
