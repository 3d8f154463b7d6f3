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

  it("gives the populated message's bytes for any number of delimited elements, a page's worth included (seeded random devices)", () => {
    let seed = 38;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const text = () => Array.from({ length: rnd(40) }, () => String.fromCharCode(32 + rnd(95))).join("") + (rnd(4) === 0 ? "é電" : "");
    for (const n of [0, 1, 2, 3, 17, 200, 1000]) {
      const devices = Array.from(
        { length: n },
        () => create(DeviceSchema, { serial: text(), agentId: text(), agentName: text(), state: text(), quarantineReason: rnd(3) === 0 ? text() : "", properties: { model: text(), apiLevel: rnd(1 << 20), bootId: text() } }),
      );
      const populated = create(ListDevicesResponseSchema, { devices });
      const pre = withPreEncodedField(ListDevicesResponseSchema, 1, devices.map((d) => lengthDelimited(toBinary(DeviceSchema, d))), { delimited: true });
      expect(Buffer.from(toBinary(ListDevicesResponseSchema, pre)).equals(Buffer.from(toBinary(ListDevicesResponseSchema, populated))), `${n} devices`).toBe(true);
      // With the page token (a known field, so written before the devices): the same message decoded.
      pre.nextPageToken = populated.nextPageToken = "next";
      expect(fromBinary(ListDevicesResponseSchema, toBinary(ListDevicesResponseSchema, pre))).toEqual(fromBinary(ListDevicesResponseSchema, toBinary(ListDevicesResponseSchema, populated)));
    }
  });

  it("tells binary codecs from JSON ones", () => {
    expect(isBinaryRequest("application/grpc")).toBe(true);
    expect(isBinaryRequest("application/grpc+proto")).toBe(true);
    expect(isBinaryRequest("application/proto")).toBe(true);
    expect(isBinaryRequest("application/json")).toBe(false);
    expect(isBinaryRequest("application/grpc-web+json")).toBe(false);
  });
});
