import { mkdirSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";

export interface IosRuntimeOptions {
  /** The host dir standing in for the app's (or the Runner's) data container. */
  container: string;
  bundleId: string;
  schemaVersion: string;
  /** Documents/farm_sdk_runtime.json or Documents/farm_wda.json */
  descriptor: string;
  /** The status route: /v1/status (SDK) or /status (WDA). */
  statusPath: string;
  processId?: number;
}

/**
 * A simulated iOS runtime (an app's SDK or WebDriverAgent) reachable over
 * the "developer tunnel" (loopback here): it binds a port of the OS's
 * choosing, then publishes its descriptor in its container. Requests must
 * carry all five identity headers; replies carry runtimeBinding.
 */
export class IosRuntime {
  readonly runtimeEpoch = `epoch-${Math.random().toString(16).slice(2, 10)}`;
  readonly processId: number;
  port = 0;
  /** Replies claim this binding instead of the true one (a confused runtime). */
  lieAbout: Partial<Record<string, unknown>> | undefined;
  /**
   * The status route's body (runtimeBinding is added): by default
   * `{ ok: true, ready: true }`; set it to serve a reply without a boolean
   * `ok`, or with `ok: false` (a runtime that is up but not ready).
   */
  statusBody: Record<string, unknown> = { ok: true, ready: true };
  private server: Server | undefined;

  constructor(private readonly opts: IosRuntimeOptions) {
    this.processId = opts.processId ?? 4242;
  }

  binding(): Record<string, unknown> {
    return { schemaVersion: this.opts.schemaVersion, bundleId: this.opts.bundleId, runtimeEpoch: this.runtimeEpoch, processId: this.processId, port: this.port };
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const b = this.binding();
      const send = (status: number, body: Record<string, unknown>) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify({ ...body, runtimeBinding: { ...b, ...(this.lieAbout ?? {}) } }));
      };
      const h = req.headers;
      const got = [h["x-farm-runtime-schema"], h["x-farm-bundle-id"], h["x-farm-runtime-epoch"], h["x-farm-process-id"], h["x-farm-runtime-port"]];
      if (got.some((v) => typeof v !== "string")) return send(400, { error: "missing identity headers" });
      const want = [b["schemaVersion"], b["bundleId"], b["runtimeEpoch"], String(b["processId"]), String(b["port"])];
      if (got.some((v, i) => v !== want[i])) return send(409, { error: "identity mismatch" });
      if (req.url === this.opts.statusPath) return send(200, this.statusBody);
      send(404, { error: "no route" });
    });
    const s = this.server;
    await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
    this.port = (s.address() as AddressInfo).port;
    this.publish({ ...this.binding(), ok: true });
  }

  /** Writes the descriptor (any content, for invalid-descriptor tests). */
  publish(descriptor: Record<string, unknown> | string): void {
    const path = join(this.opts.container, this.opts.descriptor);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, typeof descriptor === "string" ? descriptor : JSON.stringify(descriptor));
  }

  async stop(): Promise<void> {
    const s = this.server;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}
