import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { UiNode } from '../screen/ui-node.js';

/** The abstract socket name an app's SDK listens on. */
export function sdkSocketName(packageName: string): string {
  return `farm_sdk_${packageName}`;
}

export interface SdkAppView {
  packageName: string;
  versionName: string;
  pid: () => number | undefined;
  /** The app's own view tree while it is in front, else undefined. */
  tree: () => UiNode | undefined;
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
 * Listens on a host loopback port; the device exposes it under the abstract name.
 */
export async function startSdkServer(app: SdkAppView): Promise<{ port: number; close: () => Promise<void> }> {
  const server: Server = createServer((request, response) => {
    const send = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(`${JSON.stringify(body)}\n`);
    };
    if (request.method !== 'GET') return send(405, { error: 'method not allowed' });
    if (request.url === '/v1/info') return send(200, { package: app.packageName, versionName: app.versionName, pid: app.pid(), sdk: 'farm-sdk/1' });
    if (request.url === '/v1/tree') {
      const tree = app.tree();
      return tree ? send(200, { package: app.packageName, root: toJson(tree) }) : send(409, { error: 'app not in foreground' });
    }
    send(404, { error: `no route ${request.url}` });
  });
  await new Promise<void>((resolve) => server.listen({ host: '127.0.0.1', port: 0 }, resolve));
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
