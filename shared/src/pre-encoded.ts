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
  if (opts.delimited) {
    msg.$unknown = elements.length === 0 ? [] : [{ no: fieldNo, wireType: WireType.LengthDelimited, data: joinAfterFirstTag(fieldNo, elements) }];
    return msg;
  }
  msg.$unknown = elements.map((bytes) => ({ no: fieldNo, wireType: WireType.LengthDelimited, data: lengthDelimited(bytes) }));
  return msg;
}

/**
 * Delimited elements as ONE unknown field's data: the encoder writes the
 * first element's tag, then this, which carries every other element's tag
 * between them, so the bytes are those of n entries. One buffer a page
 * rather than an entry object per element (1,000 a ListDevices page, which
 * lived through the answer's gzip and were promoted to the old generation:
 * test/bench/coordinator-load.ts).
 */
function joinAfterFirstTag(fieldNo: number, elements: Uint8Array[]): Uint8Array {
  const tag = new BinaryWriter().tag(fieldNo, WireType.LengthDelimited).finish();
  let size = tag.length * (elements.length - 1);
  for (const e of elements) size += e.length;
  const out = new Uint8Array(size);
  let at = 0;
  for (let i = 0; i < elements.length; i++) {
    if (i > 0) {
      out.set(tag, at);
      at += tag.length;
    }
    const e = elements[i] as Uint8Array;
    out.set(e, at);
    at += e.length;
  }
  return out;
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
