import { describe, expect, it } from "vitest";
import { AccessUnitSplitter, MAX_ACCESS_UNIT_BYTES } from "./h264-access-units.js";

const sc4 = [0, 0, 0, 1];
const sc3 = [0, 0, 1];
// NAL headers: nal_ref_idc 3 with types 7 (SPS), 8 (PPS), 5 (IDR), 1 (slice); 6 (SEI) with ref_idc 0.
const sps = Buffer.from([...sc4, 0x67, 0x42, 0xc0, 0x1e, 0xda]);
const pps = Buffer.from([...sc4, 0x68, 0xce, 0x3c, 0x80]);
const sei = Buffer.from([...sc4, 0x06, 0x05, 0x01, 0x80]);
/** A slice; `first` says whether its first_mb_in_slice is 0 (the first bit after the header is 1). */
const slice = (type: 1 | 5, first: boolean, fill: number, len = 6, code = sc4) => Buffer.from([...code, type === 5 ? 0x65 : 0x41, first ? 0x88 : 0x40, ...Array<number>(len).fill(fill)]);

describe("H.264 access units", () => {
  it("splits a stream into key and delta frames, whole, however the bytes are cut", () => {
    const key = Buffer.concat([sps, pps, slice(5, true, 0x11)]);
    const d1 = Buffer.concat([sei, slice(1, true, 0x22)]);
    const d2 = slice(1, true, 0x33, 40, sc3);
    const stream = Buffer.concat([key, d1, d2]);
    for (const cut of [1, 2, 3, 5, 7, stream.length]) {
      const s = new AccessUnitSplitter();
      const frames = [];
      for (let i = 0; i < stream.length; i += cut) frames.push(...s.push(stream.subarray(i, i + cut)));
      // The last frame is only known whole once the stream pauses.
      expect(frames.map((f) => f.data)).toEqual([key, d1]);
      frames.push(...s.flush());
      expect(frames.map((f) => f.data)).toEqual([key, d1, d2]);
      expect(frames.map((f) => f.key)).toEqual([true, false, false]);
    }
  });

  it("keeps a picture's slices together and starts a new one at first_mb_in_slice 0", () => {
    const s = new AccessUnitSplitter();
    const a = Buffer.concat([slice(1, true, 1), slice(1, false, 2), slice(1, false, 3)]);
    const b = slice(1, true, 4);
    expect(s.push(Buffer.concat([a, b]))).toEqual([{ data: a, key: false }]);
    expect(s.flush()).toEqual([{ data: b, key: false }]);
  });

  it("does not call an IDR without its parameter sets a key frame, and drops bytes before the first start code", () => {
    const s = new AccessUnitSplitter();
    const idr = slice(5, true, 9);
    expect([...s.push(Buffer.concat([Buffer.from([7, 7, 7]), idr])), ...s.flush()]).toEqual([{ data: idr, key: false }]);
  });

  it("gives back frames that stay whole after the next bytes arrive in the same buffer", () => {
    const s = new AccessUnitSplitter();
    const chunk = Buffer.concat([sps, pps, slice(5, true, 0x11), slice(1, true, 0x22)]);
    const [first] = s.push(chunk);
    chunk.fill(0xff);
    expect(first?.data).toEqual(Buffer.concat([sps, pps, slice(5, true, 0x11)]));
  });

  it("refuses a frame larger than any screen frame", () => {
    const s = new AccessUnitSplitter();
    s.push(slice(1, true, 0));
    expect(() => s.push(Buffer.alloc(MAX_ACCESS_UNIT_BYTES, 0xaa))).toThrow(/not a screen stream/);
  });
});
