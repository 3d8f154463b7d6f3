import type { DeviceSummary } from "./device-summary.js";

/** Calls the control API (for the CLI and tests); throws with the server's error text. */
export async function controlRequest(baseUrl: string, method: string, path: string, body?: unknown): Promise<unknown> {
  const response = await fetch(new URL(path, baseUrl), {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const json = (await response.json()) as { error?: string };
  if (!response.ok) throw new Error(`control API ${method} ${path}: ${response.status} ${json.error ?? ""}`);
  return json;
}

export function setFaults(baseUrl: string, serial: string, faults: Record<string, unknown>): Promise<DeviceSummary> {
  return controlRequest(baseUrl, "POST", `/devices/${encodeURIComponent(serial)}/faults`, faults) as Promise<DeviceSummary>;
}

export function clearFaults(baseUrl: string, serial: string): Promise<DeviceSummary> {
  return controlRequest(baseUrl, "DELETE", `/devices/${encodeURIComponent(serial)}/faults`) as Promise<DeviceSummary>;
}

export function runAction(baseUrl: string, serial: string, action: Record<string, unknown>): Promise<DeviceSummary> {
  return controlRequest(baseUrl, "POST", `/devices/${encodeURIComponent(serial)}/actions`, action) as Promise<DeviceSummary>;
}
