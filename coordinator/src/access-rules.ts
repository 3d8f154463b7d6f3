import { roleAtLeast, type Role, type TokenKind } from "./token-store.js";

/** What one RPC method demands of its callers. */
export type AccessRule =
  | { kind: "none" }
  | { kind: "agent" }
  /** A user token with at least this role (viewer < operator < admin). */
  | { kind: "user"; role: Role };

const none: AccessRule = { kind: "none" };
const agent: AccessRule = { kind: "agent" };
const viewer: AccessRule = { kind: "user", role: "viewer" };
const operator: AccessRule = { kind: "user", role: "operator" };
const admin: AccessRule = { kind: "user", role: "admin" };

/**
 * Every RPC method the coordinator serves, by fully-qualified name, and who
 * may call it. The auth interceptor reads only this table; a method without
 * a row is refused, so a new method cannot ship open by accident (and the
 * role matrix test fails until it has one). Handlers do not re-check roles:
 * the agent is never asked to decide who may do what.
 *
 * viewer: read lists, evidence, activity; watch.
 * operator: leases, device actions, captures, video, uploads.
 * admin: tokens, agents (drain, remove), device aliases, abandon, pin,
 * recording-lock release.
 */
export const accessRules: Readonly<Record<string, AccessRule>> = {
  "grpc.health.v1.Health/Check": none,
  "grpc.health.v1.Health/Watch": none,

  "farm.v1.AgentService/Attach": agent,
  "farm.v1.AgentShellService/ServeShell": agent,
  "farm.v1.AgentBlobService/PutBlob": agent,
  "farm.v1.AgentBlobService/GetBlob": agent,
  "farm.v1.AgentEvidenceService/UploadEvidence": agent,

  "farm.v1.RegistryService/ListAgents": viewer,
  "farm.v1.RegistryService/ListDevices": viewer,
  "farm.v1.RegistryService/DrainAgent": admin,
  "farm.v1.RegistryService/RemoveAgent": admin,
  "farm.v1.RegistryService/AcceptDeviceAlias": admin,
  "farm.v1.RegistryService/RejectDeviceAlias": admin,

  "farm.v1.TokenService/CreateToken": admin,
  "farm.v1.TokenService/ListTokens": admin,
  "farm.v1.TokenService/RevokeToken": admin,

  "farm.v1.DeviceService/GetOwnership": viewer,
  "farm.v1.DeviceService/ReconcileOwnership": operator,
  // A receipt carries an action's output (shell stdout): for those who act.
  "farm.v1.DeviceService/GetActionReceipt": operator,
  "farm.v1.DeviceService/AbandonAction": admin,
  "farm.v1.DeviceService/RunShell": operator,
  "farm.v1.DeviceService/SetProperty": operator,
  "farm.v1.DeviceService/PinIdentity": admin,
  "farm.v1.DeviceService/GetProperties": operator,
  "farm.v1.DeviceService/ReadLogcat": operator,
  "farm.v1.DeviceService/SendInput": operator,
  "farm.v1.DeviceService/Reboot": operator,
  "farm.v1.DeviceService/TakeScreenshot": operator,
  "farm.v1.DeviceService/InstallApp": operator,
  "farm.v1.DeviceService/GetAppEndpoint": operator,
  "farm.v1.DeviceService/RemoveAppForward": operator,

  "farm.v1.LeaseService/AcquireLease": operator,
  "farm.v1.LeaseService/RenewLease": operator,
  "farm.v1.LeaseService/ReleaseLease": operator,
  "farm.v1.LeaseService/ListLeases": viewer,
  "farm.v1.LeaseService/SetDeviceLabels": operator,
  "farm.v1.LeaseService/RemoveDeviceLabel": operator,
  "farm.v1.LeaseService/ListDeviceLabels": viewer,

  "farm.v1.ActivityService/ListActivity": viewer,

  "farm.v1.ShellService/OpenShell": operator,

  "farm.v1.BlobService/UploadBlob": operator,
  "farm.v1.BlobService/DownloadBlob": operator,

  "farm.v1.EvidenceService/CaptureEvidence": operator,
  "farm.v1.EvidenceService/ListEvidence": viewer,
  "farm.v1.EvidenceService/PullEvidence": viewer,

  "farm.v1.VideoService/StartVideo": operator,
  "farm.v1.VideoService/GetVideoStatus": viewer,
  "farm.v1.VideoService/StopVideo": operator,
  "farm.v1.VideoService/InspectVideo": viewer,
  "farm.v1.VideoService/ReleaseVideo": admin,
  "farm.v1.VideoService/ListVideoSessions": viewer,

  "farm.v1.WatchService/Watch": viewer,
};

/** The table's key for a method: `package.Service/Method`. */
export function methodKey(service: { typeName: string }, method: { name: string }): string {
  return `${service.typeName}/${method.name}`;
}

/** Services with at least one row, for the health service's list. */
export function servicesWithRules(): string[] {
  return [...new Set(Object.keys(accessRules).map((k) => k.slice(0, k.indexOf("/"))))];
}

/** Why a principal of this kind and role may not call a method with this rule, or undefined if it may. */
export function refusal(rule: AccessRule, caller: { kind: TokenKind; role: Role | null }, method: string): string | undefined {
  if (rule.kind === "none") return undefined;
  if (caller.kind !== rule.kind) return `a ${caller.kind} token cannot call ${method}; it needs ${rule.kind === "agent" ? "an agent" : "a user"} token`;
  if (rule.kind === "user" && !roleAtLeast(caller.role, rule.role)) {
    return `${method} needs the ${rule.role} role${rule.role === "admin" ? "" : " or higher"}; token has ${caller.role ?? "no role"}`;
  }
  return undefined;
}
