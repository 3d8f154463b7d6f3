import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { ActivityService } from "@farm/shared/gen/farm/v1/activity_service_pb";
import { AdbTunnelService } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { EvidenceService } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { LiveScreenService } from "@farm/shared/gen/farm/v1/live_screen_service_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { SessionService } from "@farm/shared/gen/farm/v1/session_service_pb";
import { VideoService } from "@farm/shared/gen/farm/v1/video_service_pb";
import { WatchService } from "@farm/shared/gen/farm/v1/watch_service_pb";

// The same services the CLI calls, over Connect with the binary codec; the
// session cookie authenticates (same origin, so the browser sends it).
const transport = createConnectTransport({ baseUrl: location.origin, useBinaryFormat: true, fetch: (input, init) => fetch(input, { ...init, credentials: "same-origin" }) });

export const api = {
  registry: createClient(RegistryService, transport),
  leases: createClient(LeaseService, transport),
  evidence: createClient(EvidenceService, transport),
  video: createClient(VideoService, transport),
  activity: createClient(ActivityService, transport),
  watch: createClient(WatchService, transport),
  sessions: createClient(SessionService, transport),
  tunnels: createClient(AdbTunnelService, transport),
  device: createClient(DeviceService, transport),
  screen: createClient(LiveScreenService, transport),
};

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

export const fileUrl = (evidenceId: string, path: string, download = false) =>
  `/dashboard/files/evidence/${encodeURIComponent(evidenceId)}/${encodeURIComponent(path)}${download ? "?download=1" : ""}`;

/** A recorded session's screenshot (content-addressed, served only under a session that shows it). */
export const sessionImageUrl = (sessionId: string, sha256: string) => `/dashboard/files/session-images/${encodeURIComponent(sessionId)}/${encodeURIComponent(sha256)}.png`;
/** Any file a session keeps (a device log, a UI tree, a video), served as its stored type. */
export const sessionFileUrl = (sessionId: string, sha256: string) => `/dashboard/files/session-images/${encodeURIComponent(sessionId)}/${encodeURIComponent(sha256)}`;
