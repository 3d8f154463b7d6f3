import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

/**
 * Builds a message whose repeated message field `fieldNo` is carried as
 * already-encoded elements (each already length-delimited with
 * `delimited`). protobuf-es writes unknown fields verbatim, so
 * the bytes on the wire are exactly those of the populated field, while the
 * encoder skips re-encoding every element. Only valid for the binary format:
 * JSON serialization drops unknown fields, so JSON callers must get a
 * normally populated message.
 */
export function withPreEncodedField<Desc extends DescMessage>(
  schema: Desc,
  fieldNo: number,
  elements: Uint8Array[],
  opts: { delimited?: boolean } = {},
): MessageShape<Desc> {
  const msg = create(schema) as MessageShape<Desc> & { $unknown?: { no: number; wireType: WireType; data: Uint8Array }[] };
  msg.$unknown = elements.map((bytes) => ({
    no: fieldNo,
    wireType: WireType.LengthDelimited,
    data: opts.delimited ? bytes : lengthDelimited(bytes),
  }));
  return msg;
}

/**
 * An element as a repeated field carries it: its length, then its bytes.
 * Kept beside an encoded element, it spares every later listing an
 * allocation per element (`withPreEncodedField(..., { delimited: true })`).
 */
export function lengthDelimited(bytes: Uint8Array): Uint8Array {
  return new BinaryWriter().bytes(bytes).finish();
}

/** True when the request uses a binary protobuf codec (not JSON). */
export function isBinaryRequest(contentType: string | null): boolean {
  return contentType === null || !/json/i.test(contentType);
}
