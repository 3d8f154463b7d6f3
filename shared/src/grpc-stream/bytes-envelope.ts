import { ScalarType, type DescField, type DescMessage, type DescOneof, type MessageShape } from "@bufbuild/protobuf";

/**
 * Below this a payload is copied behind its head into one buffer: one write
 * costs less than two. Above it the payload is written as it is, beside its
 * head, so a relayed chunk (remote adb's 1 MiB messages) is never copied or
 * allocated again on its way out.
 */
export const BYTES_ENVELOPE_SPLIT_MIN = 16 * 1024;

/** A message whose every field is a case of its one oneof: the oneof, by schema (undefined: not such a message). */
const layouts = new WeakMap<DescMessage, DescOneof | null>();

function oneofOnly(schema: DescMessage): DescOneof | undefined {
  let o = layouts.get(schema);
  if (o === undefined) {
    const only = schema.oneofs.length === 1 ? (schema.oneofs[0] as DescOneof) : undefined;
    o = only !== undefined && schema.fields.every((f) => f.oneof === only) ? only : null;
    layouts.set(schema, o);
  }
  return o ?? undefined;
}

function isBytes(f: DescField): boolean {
  return f.fieldKind === "scalar" && f.scalar === ScalarType.BYTES;
}

function varintLength(n: number): number {
  let len = 1;
  while (n > 0x7f) {
    n = Math.floor(n / 128);
    len++;
  }
  return len;
}

function writeVarint(out: Buffer, at: number, n: number): number {
  while (n > 0x7f) {
    out[at++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  out[at++] = n;
  return at;
}

/**
 * The gRPC envelope of a message that is nothing but one bytes field (the
 * set case of a oneof that holds every field of the message, no unknown
 * fields: remote adb's `data` messages), as the bytes protobuf's encoder
 * would give, in parts: the 5-byte prefix, the field's tag and length, then
 * the payload itself (not copied when it is at least
 * BYTES_ENVELOPE_SPLIT_MIN). Undefined for any other message: the caller
 * encodes it as usual.
 */
export function bytesEnvelope<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): Buffer[] | undefined {
  const oneof = oneofOnly(schema);
  if (oneof === undefined) return undefined;
  const m = message as unknown as Record<string, unknown> & { $unknown?: unknown[] };
  if (m.$unknown !== undefined && m.$unknown.length > 0) return undefined;
  const sel = m[oneof.localName] as { case: string | undefined; value?: unknown } | undefined;
  if (sel === undefined || sel.case === undefined) return undefined;
  const field = oneof.fields.find((f) => f.localName === sel.case);
  if (field === undefined || !isBytes(field) || !(sel.value instanceof Uint8Array)) return undefined;
  const payload = sel.value;
  const tag = field.number * 8 + 2; // wire type 2: length-delimited
  const fieldHead = varintLength(tag) + varintLength(payload.byteLength);
  const split = payload.byteLength >= BYTES_ENVELOPE_SPLIT_MIN;
  const head = Buffer.allocUnsafe(5 + fieldHead + (split ? 0 : payload.byteLength));
  head[0] = 0;
  head.writeUInt32BE(fieldHead + payload.byteLength, 1);
  const at = writeVarint(head, writeVarint(head, 5, tag), payload.byteLength);
  if (!split) {
    head.set(payload, at);
    return [head];
  }
  return [head, Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength)];
}
