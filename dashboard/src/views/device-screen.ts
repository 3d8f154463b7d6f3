import { ConnectError } from "@connectrpc/connect";
import type { ScreenFormat } from "@farm/shared/gen/farm/v1/live_screen_service_pb";
import { api } from "../api.js";
import { sessionHref, statusName } from "../test-session-format.js";
import { h, replaceChildren } from "../dom.js";
import type { LiveState } from "../live-state.js";
import { forgetLeaseToken, leaseTokenOf } from "./workspace/lease-token.js";

/** A press shorter and smaller than this is a tap; otherwise a swipe. */
const TAP_MAX_MS = 400;
const TAP_MAX_PX = 8;
/** Typed characters are sent together once typing pauses this long. */
const TYPE_PAUSE_MS = 300;
/** Frames waiting in the decoder past this: deltas are dropped until the next key frame (the view catches up). */
const DECODE_QUEUE_MAX = 8;

/**
 * The live screen of a device page: for the phone's lease holder (and
 * admins), the screen as it changes on a canvas (H.264 through WebCodecs,
 * or JPEG images), and a mouse and keyboard that drive it. Every touch and
 * key is a routed SendInput with the lease token: lease-checked, journaled,
 * in the activity log, like `farm input`. `el` is the screen itself; `side`
 * its buttons, the session banner and what it says, to sit beside it.
 */
export function deviceScreen(state: LiveState, physicalId: string): { el: HTMLElement; side: HTMLElement; render: () => void; stop: () => void } {
  const canvas = h("canvas", { class: "live-screen", tabindex: "0", "aria-label": "Live screen: click to tap, drag to swipe, type to send keys" }) as HTMLCanvasElement;
  const stats = h("p", { class: "count", "data-cell": "screen-stats" });
  const recording = h("p", { class: "count", "data-cell": "screen-session" });
  const status = h("p", { role: "status", "data-cell": "screen-status" });
  const controls = h("div", { class: "screen-controls" });
  // Messages go beside the canvas: one must not move what the pointer is aiming at.
  const frame = h("div", { class: "screen-frame" }, canvas);
  const el = h("section", { id: "device-screen", "aria-label": "Live screen" }, frame, stats);
  const side = h("div", { class: "screen-side" }, controls, recording, status);
  const ctx2d = canvas.getContext("2d");
  let watching: AbortController | undefined;
  let watchingSerial = "";
  /** What the last stream that failed was for: not retried until the serial or the lease changes. */
  let failedFor = "";
  let format: ScreenFormat | undefined;
  let decoder: VideoDecoder | undefined;
  let waitKey = true;
  let frames = 0;
  let drawn = 0;
  let fps = 0;
  let latencyMs = 0;
  const fpsTimer = setInterval(() => {
    fps = frames;
    frames = 0;
    showStats();
  }, 1_000);

  const attemptKey = (serial: string) => `${serial}\n${state.leases.get(physicalId)?.leaseId ?? ""}\n${leaseTokenOf(physicalId)}`;
  const leaseToken = () => leaseTokenOf(physicalId);
  const serialNow = () => state.phone(physicalId).find((d) => d.state === "device")?.serial ?? "";
  const showStats = () => {
    stats.textContent = format ? `${canvas.width}×${canvas.height} ${format.codec === "image/jpeg" ? "JPEG images" : "H.264"} · ${fps} fps · ≈${latencyMs} ms behind` : "";
  };
  const say = (text: string, bad = false) => {
    status.textContent = text;
    status.className = bad ? "bad" : "";
  };

  const draw = (source: CanvasImageSource, width: number, height: number) => {
    if (canvas.width !== width || canvas.height !== height) {
      canvas.width = width;
      canvas.height = height;
    }
    ctx2d?.drawImage(source, 0, 0, width, height);
    frames++;
    // Frames drawn so far: what tests and the latency bench wait on.
    canvas.dataset["drawn"] = String(++drawn);
  };

  const stopWatching = () => {
    watching?.abort();
    watching = undefined;
    watchingSerial = "";
    if (decoder && decoder.state !== "closed") decoder.close();
    decoder = undefined;
    format = undefined;
  };

  const watch = async (serial: string) => {
    stopWatching();
    const abort = new AbortController();
    watching = abort;
    watchingSerial = serial;
    say("Connecting…");
    const token = leaseToken();
    try {
      for await (const res of api.screen.watchScreen({ target: { serial } }, { signal: abort.signal, ...(token ? { headers: { "x-farm-lease": token } } : {}) })) {
        const k = res.event?.kind;
        if (!k) continue;
        if (k.case === "format") {
          format = k.value;
          say("");
          if (decoder && decoder.state !== "closed") decoder.close();
          decoder = undefined;
          waitKey = true;
          if (format.codec !== "image/jpeg") {
            // WebCodecs exists only on secure pages: https, or http to localhost.
            if (typeof VideoDecoder === "undefined") {
              say("This browser cannot decode the phone's video here: WebCodecs needs the dashboard over https (farm coordinator --tls-cert, --tls-key) or on localhost.", true);
              abort.abort();
              failedFor = attemptKey(serial);
              return;
            }
            decoder = new VideoDecoder({
              output: (frame) => {
                draw(frame, frame.displayWidth, frame.displayHeight);
                frame.close();
              },
              error: (e) => say(`The video could not be decoded: ${e.message}`, true),
            });
            decoder.configure({ codec: format.codec, optimizeForLatency: true });
          }
          continue;
        }
        if (k.case !== "frame" || !format) continue;
        const f = k.value;
        latencyMs = Math.max(0, Date.now() - Number(f.capturedUnixMs));
        if (format.codec === "image/jpeg") {
          const bitmap = await createImageBitmap(new Blob([new Uint8Array(f.data)], { type: "image/jpeg" }));
          draw(bitmap, bitmap.width, bitmap.height);
          bitmap.close();
          continue;
        }
        if (!decoder || decoder.state !== "configured") continue;
        // Behind: skip to the next key frame rather than queue ever more.
        if (decoder.decodeQueueSize > DECODE_QUEUE_MAX) waitKey = true;
        if (waitKey && !f.key) continue;
        waitKey = false;
        decoder.decode(new EncodedVideoChunk({ type: f.key ? "key" : "delta", timestamp: Number(f.capturedUnixMs) * 1000, data: f.data }));
      }
      if (watching === abort) {
        failedFor = attemptKey(serial);
        say("The live screen ended.");
      }
    } catch (err) {
      if (abort.signal.aborted) return;
      failedFor = attemptKey(serial);
      say(`The live screen stopped: ${ConnectError.from(err).rawMessage}`, true);
    } finally {
      if (watching === abort) watching = undefined;
    }
  };

  /** Canvas pixels to the phone's input coordinates. */
  const toPhone = (e: PointerEvent): { x: number; y: number } | undefined => {
    if (!format) return undefined;
    const r = canvas.getBoundingClientRect();
    const x = Math.round(((e.clientX - r.left) / r.width) * format.displayWidth);
    const y = Math.round(((e.clientY - r.top) / r.height) * format.displayHeight);
    return { x: Math.min(Math.max(x, 0), format.displayWidth - 1), y: Math.min(Math.max(y, 0), format.displayHeight - 1) };
  };

  /** Your running recorded session on this phone, if any: input from the page goes into its timeline. */
  const activeSession = () => {
    for (const s of state.testSessions.values()) {
      if (s.physicalId === physicalId && s.owner === state.me?.name && !s.endTime && statusName(s.status) === "running") return s;
    }
    return undefined;
  };

  const send = async (kind: Parameters<typeof api.device.sendInput>[0]["kind"]) => {
    const serial = watchingSerial;
    const token = leaseToken();
    if (!serial) return;
    if (!token) return say("Lease the phone here (or paste your lease token above) to control it.", true);
    const session = activeSession();
    try {
      await api.device.sendInput({ target: { serial }, kind }, { headers: { "x-farm-lease": token, ...(session ? { "x-farm-session": session.sessionId } : {}) } });
    } catch (err) {
      say(`Input refused: ${ConnectError.from(err).rawMessage}`, true);
    }
  };

  let down: { x: number; y: number; cx: number; cy: number; at: number } | undefined;
  canvas.addEventListener("pointerdown", (e) => {
    const p = toPhone(e);
    if (!p) return;
    // Focused for the keyboard, without scrolling the page under the pointer.
    canvas.focus({ preventScroll: true });
    canvas.setPointerCapture(e.pointerId);
    down = { ...p, cx: e.clientX, cy: e.clientY, at: performance.now() };
  });
  canvas.addEventListener("pointerup", (e) => {
    const start = down;
    down = undefined;
    const p = toPhone(e);
    if (!start || !p) return;
    const ms = performance.now() - start.at;
    if (Math.hypot(e.clientX - start.cx, e.clientY - start.cy) <= TAP_MAX_PX && ms <= TAP_MAX_MS) void send({ case: "tap", value: { x: start.x, y: start.y } });
    else void send({ case: "swipe", value: { x1: start.x, y1: start.y, x2: p.x, y2: p.y, durationMs: Math.max(100, Math.round(ms)) } });
  });
  canvas.addEventListener("pointercancel", () => (down = undefined));

  let typed = "";
  let typeTimer: ReturnType<typeof setTimeout> | undefined;
  const flushTyped = () => {
    clearTimeout(typeTimer);
    if (typed) void send({ case: "text", value: typed });
    typed = "";
  };
  const keys: Record<string, string> = { Enter: "KEYCODE_ENTER", Backspace: "KEYCODE_DEL", Escape: "KEYCODE_BACK", Home: "KEYCODE_HOME", Tab: "KEYCODE_TAB" };
  canvas.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const key = keys[e.key];
    if (key) {
      e.preventDefault();
      flushTyped();
      void send({ case: "key", value: key });
    } else if (e.key.length === 1) {
      e.preventDefault();
      typed += e.key;
      clearTimeout(typeTimer);
      typeTimer = setTimeout(flushTyped, TYPE_PAUSE_MS);
    }
  });

  const keyButton = (label: string, code: string) => h("button", { type: "button", "data-key": code, onclick: () => void send({ case: "key", value: code }) }, label);
  const capture = h("button", {
    type: "button",
    "data-action": "capture",
    onclick: async () => {
      const serial = watchingSerial;
      if (!serial) return;
      say("Capturing evidence…");
      try {
        const r = await api.evidence.captureEvidence({ target: { serial }, label: "live screen" }, leaseToken() ? { headers: { "x-farm-lease": leaseToken() } } : {});
        replaceChildren(status, "Captured ", h("a", { href: `#/evidence/${r.evidenceId}` }, `evidence ${r.evidenceId.slice(0, 8)}`), ".");
      } catch (err) {
        say(`Capture failed: ${ConnectError.from(err).rawMessage}`, true);
      }
    },
  }, "Capture evidence");
  // Turns the phone itself (a routed, journaled shell command, like any change): portrait ⇄ landscape.
  const rotate = h("button", {
    type: "button",
    "data-action": "rotate",
    title: "Turn the phone between portrait and landscape",
    onclick: async () => {
      const serial = watchingSerial;
      const token = leaseToken();
      if (!serial || !format) return;
      if (!token) return say("Lease the phone here to turn it.", true);
      const next = format.displayWidth > format.displayHeight ? 0 : 1;
      const session = activeSession();
      try {
        await api.device.runShell(
          { target: { serial }, command: `settings put system accelerometer_rotation 0 && settings put system user_rotation ${next}` },
          { headers: { "x-farm-lease": token, ...(session ? { "x-farm-session": session.sessionId } : {}) } },
        );
      } catch (err) {
        say(`Could not turn it: ${ConnectError.from(err).rawMessage}`, true);
      }
    },
  }, "Rotate");
  const fullscreen = h("button", {
    type: "button",
    "data-action": "fullscreen",
    onclick: () => {
      if (document.fullscreenElement) void document.exitFullscreen();
      else void frame.requestFullscreen().then(() => canvas.focus({ preventScroll: true }), (err: unknown) => say(`Full screen refused: ${String(err)}`, true));
    },
  }, "Full screen");

  const render = () => {
    const me = state.me;
    const lease = state.leases.get(physicalId);
    const serial = serialNow();
    const mine = lease !== undefined && (lease.holder === me?.name || leaseToken() !== "");
    const may = me?.admin === true || mine;
    // Forgotten only once the lease list is read: before that, no lease in it means "not known yet".
    if (!lease && state.loaded) forgetLeaseToken(physicalId);
    if (!may || !serial) {
      stopWatching();
      canvas.hidden = true;
      replaceChildren(controls);
      replaceChildren(recording);
      say(!serial ? "No serial of this phone is online." : lease ? `Leased by ${lease.holder}: only they (or an admin) see its screen.` : "Lease this phone to see its screen live.");
      return;
    }
    canvas.hidden = false;
    const session = activeSession();
    replaceChildren(recording, session ? ["Input goes into your session ", h("a", { href: sessionHref(session.sessionId) }, session.name || session.sessionId.slice(0, 8)), " as steps."] : "");
    replaceChildren(
      controls,
      keyButton("Back", "KEYCODE_BACK"),
      keyButton("Home", "KEYCODE_HOME"),
      keyButton("Apps", "KEYCODE_APP_SWITCH"),
      rotate,
      fullscreen,
      capture,
    );
    if ((watchingSerial !== serial || !watching) && failedFor !== attemptKey(serial)) void watch(serial);
  };

  return {
    el,
    side,
    render,
    stop: () => {
      stopWatching();
      clearInterval(fpsTimer);
      clearTimeout(typeTimer);
    },
  };
}
