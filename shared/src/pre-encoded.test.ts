import { describe, expect, it } from "vitest";
import { create, fromBinary, toBinary, toJson } from "@bufbuild/protobuf";
import { DeviceSchema } from "./gen/farm/v1/registry_pb.js";
import { ListDevicesResponseSchema } from "./gen/farm/v1/registry_service_pb.js";
import { isBinaryRequest, withPreEncodedField } from "./pre-encoded.js";

describe("withPreEncodedField", () => {
  it("produces the same bytes as the populated message", () => {
    const devices = ["a", "b", "c"].map((serial, i) => create(DeviceSchema, { serial, state: "device", properties: { model: `m${i}`, apiLevel: 30 + i } }));
    const populated = toBinary(ListDevicesResponseSchema, create(ListDevicesResponseSchema, { devices }));
    const pre = toBinary(
      ListDevicesResponseSchema,
      withPreEncodedField(ListDevicesResponseSchema, 1, devices.map((d) => toBinary(DeviceSchema, d))),
    );
    expect(Buffer.from(pre).equals(Buffer.from(populated))).toBe(true);
    const decoded = fromBinary(ListDevicesResponseSchema, pre);
    expect(toJson(ListDevicesResponseSchema, decoded)).toEqual(toJson(ListDevicesResponseSchema, create(ListDevicesResponseSchema, { devices })));
  });

  it("tells binary codecs from JSON ones", () => {
    expect(isBinaryRequest("application/grpc")).toBe(true);
    expect(isBinaryRequest("application/grpc+proto")).toBe(true);
    expect(isBinaryRequest("application/proto")).toBe(true);
    expect(isBinaryRequest("application/json")).toBe(false);
    expect(isBinaryRequest("application/grpc-web+json")).toBe(false);
  });
});
