import { readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";

/**
 * The coordinator's version from its unauthenticated /healthz, over plain
 * node:http(s) so `farm --version` never loads Connect or generated code.
 * Any failure (refused, TLS, timeout, not a farm) is "unreachable": a
 * version query must not fail because the coordinator is down.
 */
export async function coordinatorVersion(url: string, opts: { timeoutMs: number; caFile?: string | undefined }): Promise<string> {
  let target: URL;
  try {
    target = new URL("/healthz", url);
  } catch {
    return "unreachable";
  }
  let ca: Buffer | undefined;
  try {
    ca = opts.caFile ? readFileSync(opts.caFile) : undefined;
  } catch {
    return "unreachable";
  }
  return new Promise((resolve) => {
    const done = (v: string) => {
      clearTimeout(timer);
      resolve(v);
    };
    const request = target.protocol === "https:" ? httpsRequest : httpRequest;
    const req = request(target, { method: "GET", ...(ca ? { ca } : {}) }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => {
        body += d;
        if (body.length > 64 * 1024) req.destroy();
      });
      res.on("end", () => {
        try {
          const v = (JSON.parse(body) as { version?: unknown }).version;
          done(typeof v === "string" && v !== "" ? v : "unreachable");
        } catch {
          done("unreachable");
        }
      });
      res.on("error", () => done("unreachable"));
    });
    const timer = setTimeout(() => {
      req.destroy();
      done("unreachable");
    }, opts.timeoutMs);
    req.on("error", () => done("unreachable"));
    req.end();
  });
}
