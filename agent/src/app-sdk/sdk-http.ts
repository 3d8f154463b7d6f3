import { request } from "node:http";

export interface SdkResponse {
  status: number;
  body: Buffer;
}

/** Largest SDK response read; more fails the request rather than filling memory. */
export const SDK_RESPONSE_MAX_BYTES = 8 * 1024 * 1024;

/** One HTTP GET to an SDK endpoint with identity headers, a deadline and a size cap. */
export function sdkGet(host: string, port: number, path: string, headers: Record<string, string>, timeoutMs: number): Promise<SdkResponse> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path, method: "GET", headers, agent: false, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > SDK_RESPONSE_MAX_BYTES) {
          req.destroy(new Error(`the SDK's response passed ${SDK_RESPONSE_MAX_BYTES} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      res.once("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
      res.once("error", reject);
    });
    req.once("timeout", () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.once("error", reject);
    req.end();
  });
}

export function parseJson(body: Buffer): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(body.toString("utf8")) as unknown;
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
