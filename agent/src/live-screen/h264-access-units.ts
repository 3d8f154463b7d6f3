/** NAL unit types (H.264 table 7-1) that decide where a frame begins. */
export const NalType = { SLICE: 1, IDR: 5, SEI: 6, SPS: 7, PPS: 8, AUD: 9 } as const;

/** One frame (access unit) of an Annex B stream, start codes included, as a decoder takes it. */
export interface AccessUnit {
  data: Buffer;
  /** An IDR frame with the SPS and PPS before it: a decoder can start here. */
  key: boolean;
}

/** Largest frame taken; a bigger one means the stream is not what we think (screenrecord frames are far smaller). */
export const MAX_ACCESS_UNIT_BYTES = 8 * 1024 * 1024;

/**
 * Splits a raw H.264 byte stream (Annex B, what `screenrecord
 * --output-format=h264 -` writes) into frames. A NAL unit ends where the
 * next start code begins, so the last one of a burst is only known to be
 * whole at the next frame or at `flush()` (the reader calls it when the
 * stream pauses). A frame ends when a NAL that can only begin the next one
 * arrives: SPS, PPS, AUD or SEI after a slice, or a slice whose first
 * macroblock is 0.
 */
export class AccessUnitSplitter {
  private pending: Buffer = Buffer.alloc(0);
  /** NAL units of the frame being gathered. */
  private nals: Buffer[] = [];
  private hasSlice = false;
  private hasIdr = false;
  private hasSps = false;
  private gathered = 0;

  /** Feeds bytes; returns the frames they complete. */
  push(chunk: Buffer): AccessUnit[] {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    const out: AccessUnit[] = [];
    // Every start code after the first ends the NAL before it.
    let start = startCodeAt(this.pending, 0);
    if (start < 0) {
      this.checkSize();
      return out;
    }
    for (;;) {
      const next = startCodeAt(this.pending, start + 3);
      if (next < 0) break;
      this.addNal(this.pending.subarray(start, next), out);
      start = next;
    }
    this.pending = this.pending.subarray(start);
    // The next NAL's first bytes already tell whether the frame gathered so far is whole.
    if (this.hasSlice && beginsFrame(this.pending)) this.endFrame(out);
    this.checkSize();
    return out;
  }

  /** The stream paused or ended: what is buffered is whole. */
  flush(): AccessUnit[] {
    const out: AccessUnit[] = [];
    if (startCodeAt(this.pending, 0) === 0) this.addNal(this.pending, out);
    this.pending = Buffer.alloc(0);
    this.endFrame(out);
    return out;
  }

  private addNal(nal: Buffer, out: AccessUnit[]): void {
    const type = (nal[nal[2] === 1 ? 3 : 4] ?? 0) & 0x1f;
    const isSlice = type === NalType.SLICE || type === NalType.IDR;
    if (this.hasSlice && beginsFrame(nal)) this.endFrame(out);
    // Copied: the stream's buffer is reused for what follows.
    this.nals.push(Buffer.from(nal));
    this.gathered += nal.length;
    if (isSlice) this.hasSlice = true;
    if (type === NalType.IDR) this.hasIdr = true;
    if (type === NalType.SPS) this.hasSps = true;
  }

  private endFrame(out: AccessUnit[]): void {
    if (this.hasSlice) out.push({ data: Buffer.concat(this.nals), key: this.hasIdr && this.hasSps });
    this.nals = [];
    this.gathered = 0;
    this.hasSlice = this.hasIdr = this.hasSps = false;
  }

  private checkSize(): void {
    if (this.pending.length + this.gathered > MAX_ACCESS_UNIT_BYTES) {
      throw new Error(`an H.264 frame over ${MAX_ACCESS_UNIT_BYTES} bytes: not a screen stream`);
    }
  }
}

/**
 * Whether a NAL (from its start code; its first two bytes after it are
 * enough) can only begin a new frame: SPS, PPS, AUD or SEI, or a slice whose
 * first_mb_in_slice is 0 (ue(v): its first bit is 1 exactly for 0).
 */
function beginsFrame(nal: Buffer): boolean {
  const at = nal[2] === 1 ? 3 : 4;
  if (nal.length < at + 2) return false;
  const type = (nal[at] ?? 0) & 0x1f;
  if (type === NalType.SPS || type === NalType.PPS || type === NalType.AUD || type === NalType.SEI) return true;
  return (type === NalType.SLICE || type === NalType.IDR) && ((nal[at + 1] ?? 0) & 0x80) !== 0;
}

/** Index of the next 3- or 4-byte start code at or after `from` (the 4-byte form's index), or -1. */
function startCodeAt(buf: Buffer, from: number): number {
  for (let i = buf.indexOf(0, from); i >= 0 && i + 2 < buf.length; i = buf.indexOf(0, i + 1)) {
    if (buf[i + 1] === 0 && buf[i + 2] === 1) return i > from && buf[i - 1] === 0 ? i - 1 : i;
  }
  return -1;
}
