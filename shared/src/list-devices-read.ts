import type { Timestamp } from "@bufbuild/protobuf/wkt";
// Types only: this reader loads nothing of protobuf-es (the hot `farm devices`, cli/src/hot/hot-devices.ts, builds no descriptors).
import type { Device, DeviceProperties } from "./gen/farm/v1/registry_pb.js";
import type { ListDevicesResponse } from "./gen/farm/v1/registry_service_pb.js";

/**
 * The page as farm's own reader makes it, or undefined when it holds
 * anything left to protobuf-es (list-devices-decode.ts then calls
 * fromBinary). A module of its own, without protobuf-es's runtime, whose
 * loading builds descriptor.proto's schemas.
 */
export function readPlainPage(bytes: Uint8Array): ListDevicesResponse | undefined {
  try {
    return new PageReader(bytes).response();
  } catch (err) {
    if (err !== UNUSUAL) throw err;
    return undefined;
  }
}

/** Thrown inside the reader for anything it leaves to protobuf-es. */
const UNUSUAL = new Error("not a plain ListDevicesResponse: decoded by protobuf-es");

const LEN = 2;
const VARINT = 0;
const T_RESPONSE = "farm.v1.ListDevicesResponse";
const T_DEVICE = "farm.v1.Device";
const T_PROPERTIES = "farm.v1.DeviceProperties";
const T_TIMESTAMP = "google.protobuf.Timestamp";
/** protobuf-es's strict UTF-8 (getTextEncoding().decodeUtf8(bytes, true)): fatal, and a leading U+FEFF is text. */
const utf8Strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
/** Strings up to this long are looked up among recent ones (ids, names, states) before one is made. */
const INTERN_MAX_LENGTH = 48;
const INTERN_SLOTS = 1024;
const interned: (string | undefined)[] = new Array<string | undefined>(INTERN_SLOTS).fill(undefined);
/** ASCII bytes as a string, without a view of them (Buffer's own latin1 slice). */
const latin1 = (buf: Buffer, start: number, end: number): string => (buf as unknown as { latin1Slice(s: number, e: number): string }).latin1Slice(start, end);

class PageReader {
  private pos = 0;
  private readonly buf: Buffer;

  constructor(bytes: Uint8Array) {
    this.buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  response(): ListDevicesResponse {
    const res: ListDevicesResponse = { $typeName: T_RESPONSE, devices: [], nextPageToken: "" };
    const end = this.buf.length;
    while (this.pos < end) {
      const tag = this.varint32(end);
      if (tag === ((1 << 3) | LEN)) res.devices.push(this.device(this.end(end)));
      else if (tag === ((2 << 3) | LEN)) res.nextPageToken = this.string(end);
      else throw UNUSUAL;
    }
    return res;
  }

  private device(end: number): Device {
    const d: Device = { $typeName: T_DEVICE, serial: "", agentId: "", agentName: "", state: "", quarantineReason: "", attentionReason: "" };
    while (this.pos < end) {
      switch (this.varint32(end)) {
        case (1 << 3) | LEN:
          d.serial = this.string(end);
          break;
        case (2 << 3) | LEN:
          d.agentId = this.string(end);
          break;
        case (3 << 3) | LEN:
          d.agentName = this.string(end);
          break;
        case (4 << 3) | LEN:
          d.state = this.string(end);
          break;
        case (5 << 3) | LEN:
          // A message field met twice merges, as protobuf-es does.
          d.properties = this.properties(this.end(end), d.properties);
          break;
        case (6 << 3) | LEN:
          d.updateTime = this.timestamp(this.end(end), d.updateTime);
          break;
        case (7 << 3) | LEN:
          d.quarantineReason = this.string(end);
          break;
        case (8 << 3) | LEN:
          d.attentionReason = this.string(end);
          break;
        default:
          throw UNUSUAL;
      }
    }
    if (this.pos !== end) throw UNUSUAL;
    return d;
  }

  private properties(end: number, into: DeviceProperties | undefined): DeviceProperties {
    const p: DeviceProperties = into ?? {
      $typeName: T_PROPERTIES,
      model: "",
      manufacturer: "",
      apiLevel: 0,
      androidVersion: "",
      abi: "",
      serialno: "",
      bootId: "",
      physicalId: "",
      identityStatus: "",
      pinLabel: "",
      platform: "",
      unresolvedActionIds: [],
    };
    while (this.pos < end) {
      switch (this.varint32(end)) {
        case (1 << 3) | LEN:
          p.model = this.string(end);
          break;
        case (2 << 3) | LEN:
          p.manufacturer = this.string(end);
          break;
        case (3 << 3) | VARINT:
          p.apiLevel = this.varint32(end);
          break;
        case (4 << 3) | LEN:
          p.androidVersion = this.string(end);
          break;
        case (5 << 3) | LEN:
          p.abi = this.string(end);
          break;
        case (6 << 3) | LEN:
          p.serialno = this.string(end);
          break;
        case (7 << 3) | LEN:
          p.bootId = this.string(end);
          break;
        case (8 << 3) | LEN:
          p.physicalId = this.string(end);
          break;
        case (9 << 3) | LEN:
          p.identityStatus = this.string(end);
          break;
        case (10 << 3) | LEN:
          p.pinLabel = this.string(end);
          break;
        case (11 << 3) | LEN:
          p.platform = this.string(end);
          break;
        case (12 << 3) | LEN:
          p.unresolvedActionIds.push(this.string(end));
          break;
        default:
          throw UNUSUAL;
      }
    }
    if (this.pos !== end) throw UNUSUAL;
    return p;
  }

  private timestamp(end: number, into: Timestamp | undefined): Timestamp {
    const t: Timestamp = into ?? { $typeName: T_TIMESTAMP, seconds: 0n, nanos: 0 };
    while (this.pos < end) {
      switch (this.varint32(end)) {
        case (1 << 3) | VARINT:
          // Seconds since 1970 fit a 5-byte varint until the year 2514; anything longer (negative, far future) goes to protobuf-es.
          t.seconds = BigInt(this.varint32(end));
          break;
        case (2 << 3) | VARINT: {
          const nanos = this.varint32(end);
          // A negative int32 is a 10-byte varint: protobuf-es's.
          if (nanos > 0x7fffffff) throw UNUSUAL;
          t.nanos = nanos;
          break;
        }
        default:
          throw UNUSUAL;
      }
    }
    if (this.pos !== end) throw UNUSUAL;
    return t;
  }

  /** The end of a length-delimited field that starts here, within `outer`. */
  private end(outer: number): number {
    const len = this.varint32(outer);
    const end = this.pos + len;
    if (end > outer) throw UNUSUAL;
    return end;
  }

  /**
   * A string field's value: ASCII read straight from the bytes, other valid
   * UTF-8 by protobuf-es's own decoder; invalid UTF-8 (which protobuf-es
   * refuses or replaces, by the field's rules) goes to protobuf-es.
   */
  private string(outer: number): string {
    const end = this.end(outer);
    const start = this.pos;
    this.pos = end;
    const buf = this.buf;
    let hash = end - start;
    for (let i = start; i < end; i++) {
      const b = buf[i] as number;
      if (b > 0x7f) {
        try {
          return utf8Strict.decode(buf.subarray(start, end));
        } catch {
          throw UNUSUAL;
        }
      }
      hash = (Math.imul(hash, 31) + b) | 0;
    }
    if (end - start > INTERN_MAX_LENGTH) return latin1(buf, start, end);
    // The same short value (a state, a model, an agent's name) is one string, not one per phone: less to allocate and to keep.
    const slot = hash & (INTERN_SLOTS - 1);
    const seen = interned[slot];
    if (seen !== undefined && seen.length === end - start) {
      let same = true;
      for (let i = 0; i < seen.length; i++) {
        if (seen.charCodeAt(i) !== buf[start + i]) {
          same = false;
          break;
        }
      }
      if (same) return seen;
    }
    const str = latin1(buf, start, end);
    interned[slot] = str;
    return str;
  }

  /** An unsigned varint of at most 32 bits (5 bytes); longer ones go to protobuf-es. */
  private varint32(end: number): number {
    const buf = this.buf;
    let value = 0;
    for (let shift = 0; shift < 35; shift += 7) {
      if (this.pos >= end) throw UNUSUAL;
      const b = buf[this.pos++] as number;
      if (shift === 28) {
        if (b > 0x0f) throw UNUSUAL;
        return (value | (b << 28)) >>> 0;
      }
      value |= (b & 0x7f) << shift;
      if (b < 0x80) return value;
    }
    throw UNUSUAL;
  }
}
