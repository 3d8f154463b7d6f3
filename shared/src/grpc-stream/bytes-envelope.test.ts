/**
 * The uncopied envelope of a bytes-only message against protobuf-es's own
 * encoding: byte for byte the same envelope for every farm message it
 * takes, at every payload size around the varint and split boundaries, and
 * undefined (the caller encodes as usual) for everything else.
 */
import { describe, expect, it } from "vitest";
import { create, toBinary, type DescMessage } from "@bufbuild/protobuf";
import { OpenAdbStreamRequestSchema, OpenAdbStreamResponseSchema } from "../gen/farm/v1/adb_tunnel_service_pb.js";
import { ServeAdbStreamRequestSchema, ServeAdbStreamResponseSchema } from "../gen/farm/v1/agent_adb_service_pb.js";
import { BlobPartSchema } from "../gen/farm/v1/blob_pb.js";
import { OpenShellResponseSchema } from "../gen/farm/v1/shell_service_pb.js";
import { PullEvidenceResponseSchema } from "../gen/farm/v1/evidence_service_pb.js";
import { RunShellRequestSchema } from "../gen/farm/v1/device_service_pb.js";
import { BYTES_ENVELOPE_SPLIT_MIN, bytesEnvelope } from "./bytes-envelope.js";
import { envelopeOf } from "./write-envelopes.js";

const SIZES = [0, 1, 127, 128, 129, 16_383, BYTES_ENVELOPE_SPLIT_MIN - 1, BYTES_ENVELOPE_SPLIT_MIN, BYTES_ENVELOPE_SPLIT_MIN + 1, 65_536, 2_097_151, 2_097_152, 1024 * 1024 + 7];

/** A payload that is a view into a larger buffer at an odd offset, as a chunk cut from a socket read is. */
function payload(n: number, seed: number): Uint8Array {
  const whole = Buffer.alloc(n + 11);
  for (let i = 0; i < whole.length; i++) whole[i] = (i * 31 + seed) & 0xff;
  return whole.subarray(7, 7 + n);
}

const bytesCases: { schema: DescMessage; make: (p: Uint8Array) => unknown }[] = [
  { schema: OpenAdbStreamRequestSchema, make: (p) => create(OpenAdbStreamRequestSchema, { kind: { case: "data", value: p } }) },
  { schema: OpenAdbStreamResponseSchema, make: (p) => create(OpenAdbStreamResponseSchema, { kind: { case: "data", value: p } }) },
  { schema: ServeAdbStreamRequestSchema, make: (p) => create(ServeAdbStreamRequestSchema, { kind: { case: "data", value: p } }) },
  { schema: ServeAdbStreamResponseSchema, make: (p) => create(ServeAdbStreamResponseSchema, { kind: { case: "data", value: p } }) },
  { schema: BlobPartSchema, make: (p) => create(BlobPartSchema, { kind: { case: "chunk", value: p } }) },
  { schema: OpenShellResponseSchema, make: (p) => create(OpenShellResponseSchema, { kind: { case: "output", value: p } }) },
  { schema: PullEvidenceResponseSchema, make: (p) => create(PullEvidenceResponseSchema, { kind: { case: "chunk", value: p } }) },
];

describe("bytesEnvelope", () => {
  it("gives the envelope protobuf-es gives, in parts, for every size", () => {
    for (const { schema, make } of bytesCases) {
      for (const [i, n] of SIZES.entries()) {
        const p = payload(n, i);
        const m = make(p) as never;
        const parts = bytesEnvelope(schema, m);
        expect(parts, `${schema.typeName} ${n}`).toBeDefined();
        expect(Buffer.concat(parts ?? []).equals(envelopeOf(toBinary(schema, m))), `${schema.typeName} ${n}`).toBe(true);
        // Large payloads travel as they are: the last part is the payload's own memory.
        if (n >= BYTES_ENVELOPE_SPLIT_MIN) {
          expect(parts).toHaveLength(2);
          expect(parts?.[1]?.buffer).toBe(p.buffer);
          expect(parts?.[1]?.byteOffset).toBe(p.byteOffset);
        } else {
          expect(parts).toHaveLength(1);
        }
      }
    }
  });

  it("leaves other cases, unset oneofs, unknown fields and other messages to the usual encoder", () => {
    expect(bytesEnvelope(OpenAdbStreamRequestSchema, create(OpenAdbStreamRequestSchema, { kind: { case: "start", value: { tunnelId: "t", service: "shell:" } } }))).toBeUndefined();
    expect(bytesEnvelope(OpenAdbStreamResponseSchema, create(OpenAdbStreamResponseSchema, { kind: { case: "opened", value: true } }))).toBeUndefined();
    expect(bytesEnvelope(ServeAdbStreamRequestSchema, create(ServeAdbStreamRequestSchema, { kind: { case: "streamId", value: "s" } }))).toBeUndefined();
    expect(bytesEnvelope(ServeAdbStreamResponseSchema, create(ServeAdbStreamResponseSchema, {}))).toBeUndefined();
    const withUnknown = create(ServeAdbStreamResponseSchema, { kind: { case: "data", value: payload(20_000, 1) } });
    withUnknown.$unknown = [{ no: 9, wireType: 0, data: new Uint8Array([1]) }];
    expect(bytesEnvelope(ServeAdbStreamResponseSchema, withUnknown)).toBeUndefined();
    // Fields outside a oneof: not such a message, whatever it holds.
    expect(bytesEnvelope(RunShellRequestSchema, create(RunShellRequestSchema, {}))).toBeUndefined();
  });
});
