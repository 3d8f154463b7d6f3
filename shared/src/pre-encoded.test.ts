import { describe, expect, it } from "vitest";
import { create, fromBinary, toBinary, toJson } from "@bufbuild/protobuf";
import { DeviceSchema } from "./gen/farm/v1/registry_pb.js";
import { ListDevicesResponseSchema } from "./gen/farm/v1/registry_service_pb.js";
import { isBinaryRequest, lengthDelimited, withPreEncodedField } from "./pre-encoded.js";

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

  it("takes elements already length-delimited, with the same bytes", () => {
    const devices = ["a", "b"].map((serial) => create(DeviceSchema, { serial, state: "device", properties: { model: "m", apiLevel: 34 } }));
    const populated = toBinary(ListDevicesResponseSchema, create(ListDevicesResponseSchema, { devices, nextPageToken: "t" }));
    const pre = withPreEncodedField(ListDevicesResponseSchema, 1, devices.map((d) => lengthDelimited(toBinary(DeviceSchema, d))), { delimited: true });
    expect(Buffer.from(toBinary(ListDevicesResponseSchema, pre)).equals(Buffer.from(toBinary(ListDevicesResponseSchema, create(ListDevicesResponseSchema, { devices }))))).toBe(true);
    // A known field beside them is written first; the message decodes the same.
    pre.nextPageToken = "t";
    expect(toJson(ListDevicesResponseSchema, fromBinary(ListDevicesResponseSchema, toBinary(ListDevicesResponseSchema, pre)))).toEqual(toJson(ListDevicesResponseSchema, fromBinary(ListDevicesResponseSchema, populated)));
  });

  it("tells binary codecs from JSON ones", () => {
    expect(isBinaryRequest("application/grpc")).toBe(true);
    expect(isBinaryRequest("application/grpc+proto")).toBe(true);
    expect(isBinaryRequest("application/proto")).toBe(true);
    expect(isBinaryRequest("application/json")).toBe(false);
    expect(isBinaryRequest("application/grpc-web+json")).toBe(false);
  });
});
