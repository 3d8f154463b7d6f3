import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import type { SimDevice } from "../device/sim-device.js";
import { parseFaultSettings } from "../faults/fault-settings.js";
import { applyDeviceAction, parseDeviceAction } from "./device-actions.js";
import { summarize } from "./device-summary.js";

export interface ControlServer {
  /** Base URL, e.g. http://127.0.0.1:41234 */
  url: string;
  close(): Promise<void>;
}

/** Devices by adb serial (`HOST:PORT`); several serials may name one phone. */
export type DeviceDirectory = () => ReadonlyArray<{ serial: string; device: SimDevice }>;

const MAX_BODY = 64 * 1024;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function readJson(request: IncomingMessage): Promise<unknown> {
  let body = "";
  for await (const chunk of request) {
    body += (chunk as Buffer).toString("utf8");
    if (body.length > MAX_BODY) throw new HttpError(413, "body too large");
  }
  if (body.trim() === "") return {};
  try {
    return JSON.parse(body);
  } catch {
    throw new HttpError(400, "body is not valid JSON");
  }
}

/**
 * The fault-injection control API, JSON over HTTP on loopback:
 *
 *   GET    /devices                      → [DeviceSummary]
 *   GET    /devices/SERIAL               → DeviceSummary
 *   POST   /devices/SERIAL/faults {…}    → merge faults (null clears one) → DeviceSummary
 *   DELETE /devices/SERIAL/faults        → clear all faults
 *   POST   /devices/SERIAL/actions {"action":"reboot","downMs":1000} → DeviceSummary
 *
 * SERIAL is an adb serial (HOST:PORT) or a ro.serialno (first match).
 */
export async function startControlServer(directory: DeviceDirectory, host = "127.0.0.1"): Promise<ControlServer> {
  const find = (key: string): SimDevice => {
    const entries = directory();
    const found = entries.find((entry) => entry.serial === key) ?? entries.find((entry) => entry.device.serialno === key);
    if (!found) throw new HttpError(404, `no device ${JSON.stringify(key)}; known: ${entries.map((e) => e.serial).join(", ")}`);
    return found.device;
  };
  const unique = () => [...new Set(directory().map((entry) => entry.device))];

  const handle = async (request: IncomingMessage): Promise<unknown> => {
    const url = new URL(request.url ?? "/", "http://control");
    const parts = url.pathname.split("/").filter(Boolean).map(decodeURIComponent);
    const method = request.method ?? "GET";
    if (parts[0] !== "devices") throw new HttpError(404, `no route ${url.pathname}`);
    if (parts.length === 1 && method === "GET") return unique().map((device) => summarize(device, host));
    const device = find(parts[1] ?? "");
    if (parts.length === 2 && method === "GET") return summarize(device, host);
    if (parts[2] === "faults" && parts.length === 3) {
      if (method === "DELETE") device.faults.clear();
      else if (method === "POST" || method === "PUT") {
        let changes;
        try {
          changes = parseFaultSettings(await readJson(request));
        } catch (error) {
          throw error instanceof HttpError ? error : new HttpError(400, (error as Error).message);
        }
        device.faults.set(changes as Parameters<typeof device.faults.set>[0]);
      } else throw new HttpError(405, `${method} not allowed`);
      return summarize(device, host);
    }
    if (parts[2] === "actions" && parts.length === 3 && method === "POST") {
      let action;
      try {
        action = parseDeviceAction(await readJson(request));
      } catch (error) {
        throw error instanceof HttpError ? error : new HttpError(400, (error as Error).message);
      }
      await applyDeviceAction(device, action);
      return summarize(device, host);
    }
    throw new HttpError(404, `no route ${method} ${url.pathname}`);
  };

  const server = createServer((request, response) => {
    handle(request).then(
      (body) => {
        response.writeHead(200, { "content-type": "application/json" });
        response.end(`${JSON.stringify(body)}\n`);
      },
      (error: unknown) => {
        const status = error instanceof HttpError ? error.status : 500;
        response.writeHead(status, { "content-type": "application/json" });
        response.end(`${JSON.stringify({ error: (error as Error).message })}\n`);
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host, port: 0 }, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${host}:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
