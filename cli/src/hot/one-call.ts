import { connect, constants, type ClientHttp2Session, type ClientHttp2Stream, type ClientSessionOptions, type IncomingHttpHeaders, type OutgoingHttpHeaders } from "node:http2";
import { connect as tcpConnect, isIP } from "node:net";
import { connect as tlsConnect } from "node:tls";

/**
 * One gRPC request on a fresh `node:http2` session, recorded: what the hot
 * commands (`farm shell -- …`, `farm devices`) send instead of going
 * through Connect, protobuf-es and undici, whose loading was most of the
 * CLI's own start-up (docs/performance.md, "The CLI as users run it").
 *
 * It judges nothing. It records what the coordinator answered (headers,
 * DATA, trailers, a reset, a stream error), in order, so that the caller
 * can read a plain answer itself and hand anything else to the same code
 * the CLI always ran (one-call-replay.ts), and says whether anything was
 * sent at all: a session that never connected sent nothing, and the
 * command can simply run its full path instead.
 */

export type CallEvent =
  | { kind: "response"; headers: IncomingHttpHeaders }
  | { kind: "data"; chunk: Buffer }
  | { kind: "trailers"; headers: IncomingHttpHeaders }
  | { kind: "end" }
  | { kind: "error"; error: unknown }
  | { kind: "close"; rstCode: number | undefined };

export interface OneCallRequest {
  /** The coordinator's origin (http: or https:). */
  origin: string;
  /** ":path", e.g. /farm.v1.DeviceService/RunShell. */
  path: string;
  headers: OutgoingHttpHeaders;
  /** The framed request message. */
  body: Uint8Array;
  /** Local give-up, in ms (undefined: none). */
  waitMs: number | undefined;
  /** The run's stop signal (SIGINT, SIGTERM, a closed stdout). */
  stop: AbortSignal | undefined;
  /** --ca-file's PEM bundle. */
  ca?: Buffer | undefined;
  /** DATA beyond this many bytes ends the call (the answer is refused from its length prefix anyway). */
  maxBytes: number;
}

export type OneCallOutcome =
  /** The session never connected: nothing reached the coordinator. */
  | { sent: false; error: unknown }
  | {
    sent: true;
    events: CallEvent[];
    /** The local wait ran out (the stream was cancelled). */
    timedOut: boolean;
    /** The stop signal ended the call (the stream was cancelled). */
    stopped: boolean;
    /** DATA went past maxBytes (the stream was cancelled). */
    tooLarge: boolean;
  };

/** Per-stream receive window, as the CLI's usual transport sets it (shared/src/http2-windows.ts STREAM_WINDOW_BYTES). */
const STREAM_WINDOW_BYTES = 4 * 1024 * 1024;

/** Sends the request and resolves once the stream is closed (or nothing could be sent); the session is destroyed by then. */
export function oneCall(req: OneCallRequest): Promise<OneCallOutcome> {
  return new Promise((resolve) => {
    let connected = false;
    let done = false;
    const events: CallEvent[] = [];
    const flags = { timedOut: false, stopped: false, tooLarge: false };
    let session: ClientHttp2Session;
    let stream: ClientHttp2Stream | undefined;
    let timer: NodeJS.Timeout | undefined;
    const finish = (outcome: OneCallOutcome) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      req.stop?.removeEventListener("abort", onStop);
      session.destroy();
      resolve(outcome);
    };
    const cancel = (why: "timedOut" | "stopped" | "tooLarge") => {
      if (done) return;
      flags[why] = true;
      if (!connected) return finish({ sent: false, error: new Error(`the call was ${why} before the session connected`) });
      // RST_STREAM(CANCEL) ends the coordinator's work, as a gRPC client's cancel does.
      if (stream && !stream.closed) stream.close(constants.NGHTTP2_CANCEL);
      else finish({ sent: true, events, ...flags });
    };
    const onStop = () => cancel("stopped");
    try {
      session = connect(req.origin, { ...noDelaySession(req.ca), settings: { initialWindowSize: STREAM_WINDOW_BYTES } });
    } catch (error) {
      resolve({ sent: false, error });
      return;
    }
    session.once("connect", () => (connected = true));
    // Before the session connects nothing was sent; after, the stream reports what the session's failure did to it.
    session.on("error", (error: unknown) => {
      if (!connected) finish({ sent: false, error });
    });
    session.once("close", () => {
      if (!connected) finish({ sent: false, error: new Error("the http/2 session closed before it connected") });
    });
    if (req.waitMs !== undefined) timer = setTimeout(() => cancel("timedOut"), req.waitMs);
    req.stop?.addEventListener("abort", onStop);
    if (req.stop?.aborted) return onStop();
    let received = 0;
    const s = session.request({ ":method": "POST", ":path": req.path, ...req.headers });
    stream = s;
    s.on("response", (headers: IncomingHttpHeaders) => events.push({ kind: "response", headers }));
    s.on("data", (chunk: Buffer) => {
      received += chunk.length;
      if (received > req.maxBytes) return cancel("tooLarge");
      events.push({ kind: "data", chunk });
    });
    s.on("trailers", (headers: IncomingHttpHeaders) => events.push({ kind: "trailers", headers }));
    s.on("end", () => events.push({ kind: "end" }));
    s.on("error", (error: unknown) => events.push({ kind: "error", error }));
    s.on("close", () => {
      if (!connected) return finish({ sent: false, error: events.find((e) => e.kind === "error")?.error ?? new Error("the stream closed before the session connected") });
      events.push({ kind: "close", rstCode: s.rstCode });
      finish({ sent: true, events, ...flags });
    });
    s.end(req.body);
  });
}

/**
 * The socket as shared/src/no-delay.ts makes it for the usual transport
 * (Nagle off; TLS with ALPN h2, the host as servername unless it is an IP
 * address, --ca-file's roots), written out here: that module's imports
 * (farm's error table, Connect) cost the hot path its protobuf-es
 * descriptors.
 */
function noDelaySession(ca: Buffer | undefined): ClientSessionOptions {
  return {
    createConnection: (authority: URL) => {
      const port = Number(authority.port) || (authority.protocol === "https:" ? 443 : 80);
      const host = authority.hostname.replace(/^\[|\]$/g, "");
      return authority.protocol === "https:"
        ? tlsConnect({ host, port, ALPNProtocols: ["h2"], ...(isIP(host) ? {} : { servername: host }), ...(ca ? { ca } : {}) }).setNoDelay(true)
        : tcpConnect({ host, port, noDelay: true });
    },
  };
}

/** A message framed as gRPC sends it: no compression, a 4-byte big-endian length. */
export function frame(message: Uint8Array): Uint8Array {
  const out = Buffer.allocUnsafe(message.length + 5);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  out.set(message, 5);
  return out;
}

/**
 * The one message of a plain answer: HTTP 200, a gRPC content type, status
 * 0 in the trailers, exactly one uncompressed message and nothing else
 * (no reset, no error). Anything else is undefined: the replay judges it.
 */
export function plainAnswer(events: readonly CallEvent[]): Uint8Array | undefined {
  let headers: IncomingHttpHeaders | undefined;
  let trailers: IncomingHttpHeaders | undefined;
  const chunks: Buffer[] = [];
  for (const e of events) {
    if (e.kind === "response") headers = e.headers;
    else if (e.kind === "data") chunks.push(e.chunk);
    else if (e.kind === "trailers") trailers = e.headers;
    else if (e.kind === "error" || (e.kind === "close" && e.rstCode !== undefined && e.rstCode !== constants.NGHTTP2_NO_ERROR)) return undefined;
  }
  if (!headers || !trailers || Number(headers[":status"]) !== 200 || headers["grpc-status"] !== undefined) return undefined;
  const type = headers["content-type"];
  if (type !== "application/grpc" && type !== "application/grpc+proto") return undefined;
  if (trailers["grpc-status"] !== "0") return undefined;
  const all = chunks.length === 1 ? chunks[0] as Buffer : Buffer.concat(chunks);
  if (all.length < 5 || all[0] !== 0 || all.readUInt32BE(1) !== all.length - 5) return undefined;
  return all.subarray(5);
}
