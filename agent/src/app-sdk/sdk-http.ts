import { request } from "node:http";

export interface SdkResponse {
  status: number;
  body: Buffer;
}

/** Largest SDK response read; more fails the request rather than filling memory. */
export const SDK_RESPONSE_MAX_BYTES = 8 * 1024 * 1024;

/**
 * One HTTP GET to an SDK endpoint with identity headers, a size cap and a
 * total deadline: the whole answer must arrive within timeoutMs. (An idle
 * timeout would let a runtime that trickles bytes hold the caller forever.)
 */
export function sdkGet(host: string, port: number, path: string, headers: Record<string, string>, timeoutMs: number): Promise<SdkResponse> {
  if (!(timeoutMs > 0)) return Promise.reject(new Error("no time left for the request"));
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (err: Error | undefined, res?: SdkResponse) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) reject(err);
      else resolve(res as SdkResponse);
    };
    const req = request({ host, port, path, method: "GET", headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > SDK_RESPONSE_MAX_BYTES) return fail(new Error(`the SDK's response passed ${SDK_RESPONSE_MAX_BYTES} bytes`));
        chunks.push(chunk);
      });
      res.once("end", () => settle(undefined, { status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
      res.once("error", (err) => settle(err));
      // A destroyed request can close the response without "end" or "error".
      res.once("close", () => settle(new Error("the SDK closed the connection before its answer was complete")));
    });
    // Settle first so the caller sees this reason, not the reset it causes.
    const fail = (err: Error) => {
      settle(err);
      req.destroy(err);
    };
    const timer = setTimeout(() => fail(new Error(`no complete answer within ${timeoutMs} ms`)), timeoutMs);
    req.once("error", (err) => settle(err));
    req.end();
  });
}

/**
 * The time left of a budget that began with a deadline: every step of a
 * multi-step discovery asks it, so the steps together stay inside it.
 */
export class Budget {
  readonly deadline: number;

  constructor(timeoutMs: number, now = Date.now()) {
    this.deadline = now + Math.max(0, timeoutMs);
  }

  remaining(): number {
    return Math.max(0, this.deadline - Date.now());
  }

  /** The smaller of `capMs` and what is left, less `reserveMs` kept back for cleanup. */
  slice(capMs = Infinity, reserveMs = 0): number {
    return Math.max(0, Math.min(capMs, this.remaining() - reserveMs));
  }

  /** Aborts when the budget (less `reserveMs`) is spent. */
  signal(reserveMs = 0): AbortSignal {
    return AbortSignal.timeout(Math.max(0, this.remaining() - reserveMs));
  }
}

export function parseJson(body: Buffer): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(body.toString("utf8")) as unknown;
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
