import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { FaultSettings } from "../faults/fault-settings.js";
import type { UiNode } from "../screen/ui-node.js";

/** The abstract socket an SDK runtime listens on: new with every start of the app. */
export function sdkSocketName(runtimeEpoch: string): string {
  return `farm-sdk-${runtimeEpoch}`;
}

/** Where the SDK publishes its endpoint, in the app's private data dir. */
export const SDK_ENDPOINT_FILE = "files/farm_sdk_endpoint.json";
export const SDK_ENDPOINT_SCHEMA = "farm.android-sdk-endpoint.v1";

export interface SdkAppView {
  packageName: string;
  versionName: string;
  runtimeEpoch: string;
  pid: () => number | undefined;
  /** The app's own view tree while it is in front, else undefined. */
  tree: () => UiNode | undefined;
  /** The phone's faults now (sdkTrickleMs bites here). */
  faults?: () => Readonly<FaultSettings>;
}

function toJson(node: UiNode): unknown {
  return {
    class: node.className,
    text: node.text,
    resourceId: node.resourceId,
    contentDesc: node.contentDesc,
    bounds: [node.bounds.left, node.bounds.top, node.bounds.right, node.bounds.bottom],
    checkable: node.checkable,
    checked: node.checked,
    enabled: node.enabled,
    children: node.children.map(toJson),
  };
}

/**
 * The in-app SDK's HTTP API (what farm discovers on `localabstract:`):
 * GET /v1/info, GET /v1/tree (the app's view tree as JSON), anything else 404.
 * Every request must carry the runtime's identity (X-Farm-Sdk-Package and
 * X-Farm-Sdk-Epoch): a missing one is 400, another runtime's is 409. Every
 * reply names its runtime in `runtimeBinding`. Listens on a host loopback
 * port; the device exposes it under the abstract name.
 */
export async function startSdkServer(app: SdkAppView): Promise<{ port: number; close: () => Promise<void> }> {
  const server: Server = createServer((request, response) => {
    const runtimeBinding = { packageName: app.packageName, runtimeEpoch: app.runtimeEpoch };
    const send = (status: number, body: Record<string, unknown>) => {
      response.writeHead(status, { "content-type": "application/json" });
      response.end(`${JSON.stringify({ ...body, runtimeBinding })}\n`);
    };
    const trickleMs = app.faults?.().sdkTrickleMs;
    if (trickleMs !== undefined) {
      // A live but endless answer: an idle timeout never fires, only a total deadline ends it.
      response.writeHead(200, { "content-type": "application/json" });
      response.write("{");
      const timer = setInterval(() => response.write(" "), Math.max(1, trickleMs));
      timer.unref();
      response.once("close", () => clearInterval(timer));
      return;
    }
    if (request.method !== "GET") return send(405, { error: "method not allowed" });
    const pkg = request.headers["x-farm-sdk-package"];
    const epoch = request.headers["x-farm-sdk-epoch"];
    if (typeof pkg !== "string" || typeof epoch !== "string") return send(400, { error: "missing identity headers" });
    if (pkg !== app.packageName || epoch !== app.runtimeEpoch) return send(409, { error: `runtime mismatch: this is ${app.packageName}@${app.runtimeEpoch}` });
    if (request.url === "/v1/info") return send(200, { package: app.packageName, versionName: app.versionName, pid: app.pid(), sdk: "farm-sdk/1" });
    if (request.url === "/v1/tree") {
      const tree = app.tree();
      return tree ? send(200, { package: app.packageName, root: toJson(tree) }) : send(409, { error: "app not in foreground" });
    }
    send(404, { error: `no route ${request.url}` });
  });
  await new Promise<void>((resolve) => server.listen({ host: "127.0.0.1", port: 0 }, resolve));
  // A test that forgets to stop the device must not hang on this server.
  server.unref();
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
