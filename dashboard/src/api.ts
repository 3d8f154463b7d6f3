import { createConnectTransport } from "@connectrpc/connect-web";
import { createApi } from "./api-clients.js";

// The same services the CLI calls, over Connect with the binary codec; the
// session cookie authenticates (same origin, so the browser sends it).
const transport = createConnectTransport({ baseUrl: location.origin, useBinaryFormat: true, fetch: (input, init) => fetch(input, { ...init, credentials: "same-origin" }) });

export const api = createApi(transport);

export interface Me {
  name: string;
  /** viewer, operator or admin. */
  role: string;
  admin: boolean;
}

export async function me(): Promise<Me | null> {
  const r = await fetch("/dashboard/api/me", { credentials: "same-origin" });
  return r.ok ? ((await r.json()) as Me) : null;
}

export async function signIn(token: string): Promise<Me> {
  const r = await fetch("/dashboard/api/sign-in", { method: "POST", credentials: "same-origin", headers: { "content-type": "application/json" }, body: JSON.stringify({ token }) });
  const body = (await r.json()) as Me & { message?: string };
  if (!r.ok) throw new Error(body.message ?? `sign-in failed (${r.status})`);
  return body;
}

export async function signOut(): Promise<void> {
  await fetch("/dashboard/api/sign-out", { method: "POST", credentials: "same-origin" });
}

export const fileUrl = (evidenceId: string, path: string, download = false) => `/dashboard/files/evidence/${encodeURIComponent(evidenceId)}/${encodeURIComponent(path)}${download ? "?download=1" : ""}`;

/** A recorded session's screenshot (content-addressed, served only under a session that shows it). */
export const sessionImageUrl = (sessionId: string, sha256: string) => `/dashboard/files/session-images/${encodeURIComponent(sessionId)}/${encodeURIComponent(sha256)}.png`;
/** Any file a session keeps (a device log, a UI tree, a video), served as its stored type. */
export const sessionFileUrl = (sessionId: string, sha256: string) => `/dashboard/files/session-images/${encodeURIComponent(sessionId)}/${encodeURIComponent(sha256)}`;
