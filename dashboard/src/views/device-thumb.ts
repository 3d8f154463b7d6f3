import { ConnectError } from "@connectrpc/connect";
import { api } from "../api.js";
import { h } from "../dom.js";

/** Thumbnail width in canvas pixels; the height follows the phone's shape. */
const THUMB_WIDTH = 180;

/**
 * A phone's screen as a small live picture for the device grid: the
 * coordinator sends a thumbnail viewer only the key frames of the phone's
 * one shared stream (each decodes alone), so it updates at a low rate and
 * costs a fraction of a full view. `failed` is told when it stops.
 */
export function liveThumb(serial: string, leaseToken: string, failed: (message: string) => void): { el: HTMLCanvasElement; stop: () => void } {
  const el = h("canvas", { class: "thumb live-thumb", width: THUMB_WIDTH, height: 400, "aria-label": "Live thumbnail of the phone's screen" }) as HTMLCanvasElement;
  const ctx = el.getContext("2d");
  const abort = new AbortController();
  let drawn = 0;
  let decoder: VideoDecoder | undefined;
  const draw = (source: CanvasImageSource, width: number, height: number) => {
    const w = THUMB_WIDTH;
    const hgt = Math.max(1, Math.round((height / Math.max(1, width)) * w));
    if (el.width !== w || el.height !== hgt) {
      el.width = w;
      el.height = hgt;
    }
    ctx?.drawImage(source, 0, 0, w, hgt);
    // Frames drawn so far: what tests wait on.
    el.dataset["drawn"] = String(++drawn);
  };
  const closeDecoder = () => {
    if (decoder && decoder.state !== "closed") decoder.close();
    decoder = undefined;
  };
  void (async () => {
    let jpeg = false;
    try {
      for await (const res of api.screen.watchScreen({ target: { serial }, thumbnail: true }, { signal: abort.signal, ...(leaseToken ? { headers: { "x-farm-lease": leaseToken } } : {}) })) {
        const k = res.event?.kind;
        if (k?.case === "format") {
          closeDecoder();
          jpeg = k.value.codec === "image/jpeg";
          if (!jpeg) {
            if (typeof VideoDecoder === "undefined") throw new Error("this browser cannot decode the phone's video here (WebCodecs needs https or localhost)");
            decoder = new VideoDecoder({
              output: (frame) => {
                draw(frame, frame.displayWidth, frame.displayHeight);
                frame.close();
              },
              error: (e) => failed(`the thumbnail could not be decoded: ${e.message}`),
            });
            decoder.configure({ codec: k.value.codec, optimizeForLatency: true });
          }
        } else if (k?.case === "frame") {
          if (jpeg) {
            const bitmap = await createImageBitmap(new Blob([new Uint8Array(k.value.data)], { type: "image/jpeg" }));
            draw(bitmap, bitmap.width, bitmap.height);
            bitmap.close();
          } else if (decoder?.state === "configured" && k.value.key) {
            decoder.decode(new EncodedVideoChunk({ type: "key", timestamp: Number(k.value.capturedUnixMs) * 1000, data: k.value.data }));
          }
        }
      }
      if (!abort.signal.aborted) failed("the live thumbnail ended");
    } catch (err) {
      if (!abort.signal.aborted) failed(`the live thumbnail stopped: ${ConnectError.from(err).rawMessage}`);
    } finally {
      closeDecoder();
    }
  })();
  return {
    el,
    stop: () => {
      abort.abort();
      closeDecoder();
    },
  };
}
