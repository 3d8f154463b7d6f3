import { gunzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { compressionGzip } from "@connectrpc/connect-node";
import { ListDevicesResponseSchema } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { answerGzip, ANSWER_COMPRESSION } from "./answer-compression.js";

/** A 1,000-phone page, as the coordinator's largest answers are. */
function page(): Uint8Array {
  const devices = Array.from({ length: 1000 }, (_, i) => ({
    serial: `emulator-${5554 + i}`,
    agentId: `agent-${Math.floor(i / 10)}`,
    agentName: `lab-${Math.floor(i / 10)}`,
    state: "device",
    properties: { model: "Pixel 7", manufacturer: "Google", apiLevel: 34, physicalId: `ph_${(i * 7919).toString(16).padStart(24, "0")}` },
  }));
  return toBinary(ListDevicesResponseSchema, create(ListDevicesResponseSchema, { devices }));
}

describe("answer compression", () => {
  it("gzips at zlib's fastest level, and Connect's gzip and plain gunzip read it back", async () => {
    const bytes = page();
    const zipped = await answerGzip.compress(bytes);
    // gzip's header: magic 1f 8b, deflate, and XFL 4 ("fastest") that zlib writes for levels below 2 (0 at its default).
    expect([zipped[0], zipped[1], zipped[2], zipped[8]]).toEqual([0x1f, 0x8b, 8, 4]);
    expect(zipped.length).toBeLessThan(bytes.length / 2);
    expect(Buffer.from(await compressionGzip.decompress(zipped, bytes.length))).toEqual(Buffer.from(bytes));
    expect(Buffer.from(gunzipSync(zipped))).toEqual(Buffer.from(bytes));
  });

  it("inflates requests with Connect's cap and errors", async () => {
    const bytes = page();
    const zipped = await compressionGzip.compress(bytes);
    expect(Buffer.from(await answerGzip.decompress(zipped, bytes.length))).toEqual(Buffer.from(bytes));
    const over = await answerGzip.decompress(zipped, bytes.length - 1).then(() => undefined, (e: unknown) => e);
    expect(over).toBeInstanceOf(ConnectError);
    expect((over as ConnectError).code).toBe(Code.ResourceExhausted);
  });

  it("keeps Connect's names and order (gzip, then br)", () => {
    expect(ANSWER_COMPRESSION.map((c) => c.name)).toEqual(["gzip", "br"]);
  });
});
