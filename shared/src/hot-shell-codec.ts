/**
 * RunShellRequest's bytes and RunShellResponse from its bytes, without
 * protobuf-es: `farm shell -- …` sends and reads one of each, and building
 * protobuf-es's descriptors at start-up was a large share of the CLI's own
 * time (docs/performance.md, "The CLI as users run it"). Written for the
 * fields farm sends; the request's bytes are toBinary's own, and the reader
 * returns undefined for anything it does not know (an unknown field, a wire
 * type a field does not use, bytes that end early), so the caller hands the
 * answer to protobuf-es instead (hot-shell-codec.test.ts checks both
 * against protobuf-es, on random and mutated bytes).
 */

export interface HotShellRequest {
  target: { serial: string; agent: string; requestId: string };
  command: string;
}

/** RunShellResponse's fields, as protobuf-es gives them (dispatched absent when unset). */
export interface HotShellResponse {
  actionId: string;
  exitCode: number;
  stdout: Uint8Array;
  stderr: Uint8Array;
  dispatched?: boolean;
  ambiguous: boolean;
}

const LEN = 2;
const VARINT = 0;

/** RunShellRequest as toBinary writes it: fields in number order, empty strings left out, the target always present. */
export function encodeRunShellRequest(req: HotShellRequest): Uint8Array {
  const target = concat([stringField(1, req.target.serial), stringField(2, req.target.agent), stringField(3, req.target.requestId)]);
  return concat([tag(1, LEN), varint(target.length), target, stringField(2, req.command)]);
}

/** ListDevicesRequest's bytes (agent, state, page_size, page_token), as toBinary writes them. */
export function encodeListDevicesRequest(req: { agent: string; state: string; pageSize: number; pageToken: string }): Uint8Array {
  const size = req.pageSize === 0 ? [] : [tag(3, VARINT), int32(req.pageSize)];
  return concat([stringField(1, req.agent), stringField(2, req.state), ...size, stringField(4, req.pageToken)]);
}

/** The answer, or undefined when it holds anything this reader leaves to protobuf-es. */
export function readRunShellResponse(bytes: Uint8Array): HotShellResponse | undefined {
  const r = new Reader(bytes);
  const res: HotShellResponse = { actionId: "", exitCode: 0, stdout: new Uint8Array(0), stderr: new Uint8Array(0), ambiguous: false };
  try {
    while (r.pos < bytes.length) {
      switch (r.varint()) {
        case (1 << 3) | LEN:
          res.actionId = r.string();
          break;
        case (2 << 3) | VARINT:
          res.exitCode = r.int32();
          break;
        case (3 << 3) | LEN:
          res.stdout = r.bytes();
          break;
        case (4 << 3) | LEN:
          res.stderr = r.bytes();
          break;
        case (5 << 3) | VARINT:
          res.dispatched = r.bool();
          break;
        case (6 << 3) | VARINT:
          res.ambiguous = r.bool();
          break;
        default:
          return undefined;
      }
    }
  } catch (err) {
    if (err === UNUSUAL) return undefined;
    throw err;
  }
  // As protobuf-es: the optional field is a key only once set (after the others).
  return res;
}

const UNUSUAL = new Error("not a plain message: left to protobuf-es");
const utf8 = new TextEncoder();
// ignoreBOM: a leading U+FEFF is kept, as protobuf-es keeps it.
const fromUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

class Reader {
  pos = 0;
  constructor(private readonly buf: Uint8Array) {}

  /** A varint of at most 5 bytes, as an unsigned 32-bit number; longer ones are protobuf-es's. */
  varint(): number {
    let result = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      if (this.pos >= this.buf.length) throw UNUSUAL;
      const b = this.buf[this.pos++] as number;
      result += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) {
        if (result > 0xffffffff) throw UNUSUAL;
        return result;
      }
    }
    throw UNUSUAL;
  }

  /** An int32: a non-negative one in up to 5 bytes; a negative one is 10 bytes, whose low 32 bits are the value. */
  int32(): number {
    const start = this.pos;
    // The value's first 35 bits, and its low 32.
    let full = 0;
    let low = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.buf.length) throw UNUSUAL;
      const b = this.buf[this.pos++] as number;
      if (i < 5) {
        full += (b & 0x7f) * 2 ** (7 * i);
        low += (i === 4 ? b & 0x0f : b & 0x7f) * 2 ** (7 * i);
      }
      if ((b & 0x80) === 0) {
        const len = this.pos - start;
        // Only the two shapes toBinary writes: up to 5 bytes for 0..2^31-1, exactly 10 for a negative value.
        if (len <= 5 && full <= 0x7fffffff) return full;
        if (len === 10 && low >= 0x80000000 && this.signExtended(start)) return low | 0;
        throw UNUSUAL;
      }
    }
    throw UNUSUAL;
  }

  /** Bytes 5..9 of a negative int32's varint: all continuation bits and ones, the last 0x01. */
  private signExtended(start: number): boolean {
    const b = this.buf;
    return (b[start + 4]! & 0x70) === 0x70 && b[start + 5] === 0xff && b[start + 6] === 0xff && b[start + 7] === 0xff && b[start + 8] === 0xff && b[start + 9] === 0x01;
  }

  bool(): boolean {
    const b = this.buf[this.pos];
    // A one-byte 0 or 1, as toBinary writes a bool; anything else is protobuf-es's.
    if (b !== 0 && b !== 1) throw UNUSUAL;
    this.pos++;
    return b === 1;
  }

  bytes(): Uint8Array {
    const len = this.varint();
    const end = this.pos + len;
    if (end > this.buf.length) throw UNUSUAL;
    const out = this.buf.slice(this.pos, end);
    this.pos = end;
    return out;
  }

  string(): string {
    const len = this.varint();
    const end = this.pos + len;
    if (end > this.buf.length) throw UNUSUAL;
    let s: string;
    try {
      s = fromUtf8.decode(this.buf.subarray(this.pos, end));
    } catch {
      // Invalid UTF-8: protobuf-es's own answer (an error, or its replacement characters).
      throw UNUSUAL;
    }
    this.pos = end;
    return s;
  }
}

function tag(field: number, wire: number): Uint8Array {
  return varint((field << 3) | wire);
}

function varint(n: number): Uint8Array {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Uint8Array.from(out);
}

/** An int32 as a varint: a negative one sign-extended to 10 bytes, as toBinary writes it. */
function int32(n: number): Uint8Array {
  if (n >= 0) return varint(n);
  const out = new Uint8Array(10);
  let v = BigInt.asUintN(64, BigInt(n));
  for (let i = 0; i < 10; i++) {
    out[i] = Number(v & 0x7fn) | (i < 9 ? 0x80 : 0);
    v >>= 7n;
  }
  return out;
}

function stringField(field: number, s: string): Uint8Array {
  if (s === "") return new Uint8Array(0);
  const b = utf8.encode(s);
  return concat([tag(field, LEN), varint(b.length), b]);
}

function concat(parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
