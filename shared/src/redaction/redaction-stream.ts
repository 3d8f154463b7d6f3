import { PassThrough, Transform, type TransformCallback } from "node:stream";
import { scan, type Matcher } from "./matcher.js";

/**
 * Incremental masking of text that arrives in pieces: `push` returns what
 * is safe to emit so far, `end` the rest. Holds back at most a matcher's
 * horizon (longest needle, or a `Basic` token still running), so a secret
 * split across pieces is still masked; the output over any split equals
 * `scan(whole, final)`.
 */
export interface IncrementalRedactor {
  push(piece: string): string;
  end(): string;
}

export function incrementalRedactor(m: Matcher | undefined): IncrementalRedactor {
  let pending = "";
  return {
    push(piece) {
      if (m === undefined) return piece;
      const s = pending + piece;
      const { out, rest } = scan(m, s, false);
      pending = s.slice(rest);
      return out;
    },
    end() {
      const s = pending;
      pending = "";
      return m === undefined ? s : scan(m, s, true).out;
    },
  };
}

/**
 * A byte stream transform. Bytes are read as latin1 (one char per byte) and
 * matched against the needles' UTF-8 bytes, so a multi-byte character cut
 * by a chunk boundary needs no decoder, invalid UTF-8 passes through
 * unchanged, and unmasked bytes come out identical.
 */
export function redactionTransform(byteMatcher: Matcher | undefined): Transform {
  if (byteMatcher === undefined) return new PassThrough();
  const inc = incrementalRedactor(byteMatcher);
  const emit = (s: string, cb: TransformCallback) => (s === "" ? cb() : cb(null, Buffer.from(s, "latin1")));
  return new Transform({
    transform(chunk: Buffer, _encoding, cb) {
      emit(inc.push(chunk.toString("latin1")), cb);
    },
    flush(cb) {
      emit(inc.end(), cb);
    },
  });
}
