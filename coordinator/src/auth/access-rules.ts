import { LiveScreenService } from "@farm/shared/gen/farm/v1/live_screen_service_pb";
import { AgentScreenService } from "@farm/shared/gen/farm/v1/agent_screen_service_pb";
import { AgentLogcatService } from "@farm/shared/gen/farm/v1/agent_logcat_service_pb";
import { LogcatService } from "@farm/shared/gen/farm/v1/logcat_service_pb";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { Access, rulesOf } from "@farm/shared/method-rules";
import { Health } from "@farm/shared/gen/grpc/health/v1/health_pb";
import { AgentService } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { AgentShellService } from "@farm/shared/gen/farm/v1/agent_shell_service_pb";
import { AgentBlobService } from "@farm/shared/gen/farm/v1/agent_blob_service_pb";
import { AgentEvidenceService } from "@farm/shared/gen/farm/v1/agent_evidence_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { TokenService } from "@farm/shared/gen/farm/v1/token_service_pb";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { ActivityService } from "@farm/shared/gen/farm/v1/activity_service_pb";
import { ShellService } from "@farm/shared/gen/farm/v1/shell_service_pb";
import { BlobService } from "@farm/shared/gen/farm/v1/blob_service_pb";
import { EvidenceService } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { VideoService } from "@farm/shared/gen/farm/v1/video_service_pb";
import { WatchService } from "@farm/shared/gen/farm/v1/watch_service_pb";
import { SessionService } from "@farm/shared/gen/farm/v1/session_service_pb";
import { ReplicaService } from "@farm/shared/gen/farm/v1/replica_service_pb";
import { AdbTunnelService } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { AgentAdbService } from "@farm/shared/gen/farm/v1/agent_adb_service_pb";
import { PrivacyService } from "@farm/shared/gen/farm/v1/privacy_service_pb";
import { roleAtLeast, type Role, type TokenKind } from "./token-store.js";

/** What one RPC method demands of its callers. */
export type AccessRule =
  | { kind: "none" }
  | { kind: "agent" }
  /** Another coordinator replica of this farm (its registered secret). */
  | { kind: "replica" }
  /** A user token with at least this role (viewer < operator < admin). */
  | { kind: "user"; role: Role };

const none: AccessRule = { kind: "none" };

/** Every service the coordinator serves (agent-served services, such as AgentControlService, are not here). */
export const coordinatorServices: readonly DescService[] = [
  Health,
  AgentService,
  AgentShellService,
  AgentBlobService,
  AgentEvidenceService,
  RegistryService,
  TokenService,
  DeviceService,
  LeaseService,
  ActivityService,
  ShellService,
  BlobService,
  EvidenceService,
  VideoService,
  WatchService,
  SessionService,
  ReplicaService,
  AdbTunnelService,
  AgentAdbService,
  LiveScreenService,
  AgentScreenService,
  LogcatService,
  AgentLogcatService,
  PrivacyService,
];

/** The rule a method declares in the schema (farm.v1.rules), or undefined when it declares none. */
function ruleOf(method: DescMethod): AccessRule | undefined {
  switch (rulesOf(method).access) {
    case Access.PUBLIC:
      return none;
    case Access.AGENT:
      return { kind: "agent" };
    case Access.VIEWER:
      return { kind: "user", role: "viewer" };
    case Access.OPERATOR:
      return { kind: "user", role: "operator" };
    case Access.ADMIN:
      return { kind: "user", role: "admin" };
    case Access.REPLICA:
      return { kind: "replica" };
    default:
      return undefined;
  }
}

/**
 * Every RPC method the coordinator serves, by fully-qualified name, and who
 * may call it, read from each method's farm.v1.rules option in the schema.
 * The auth interceptor reads only this table; a method without a rule is
 * refused, so a new method cannot ship open by accident (and the role
 * matrix test fails until it has one). Handlers do not re-check roles: the
 * agent is never asked to decide who may do what.
 *
 * viewer: read lists, evidence, activity; watch.
 * operator: leases, device actions, captures, video, uploads.
 * admin: tokens, agents (drain, remove), device aliases, abandon, pin,
 * recording-lock release.
 */
export const accessRules: Readonly<Record<string, AccessRule>> = Object.fromEntries(
  coordinatorServices.flatMap((s) =>
    s.methods.flatMap((m) => {
      // The standard health service cannot carry our option: it is public by design.
      const rule = s === Health ? none : ruleOf(m);
      return rule ? [[methodKey(s, m), rule] as const] : [];
    })
  ),
);

/** The table's key for a method: `package.Service/Method`. */
export function methodKey(service: { typeName: string }, method: { name: string }): string {
  return `${service.typeName}/${method.name}`;
}

/** Services with at least one row, for the health service's list. */
export function servicesWithRules(): string[] {
  return [...new Set(Object.keys(accessRules).map((k) => k.slice(0, k.indexOf("/"))))];
}

/** Why a principal of this kind and role may not call a method with this rule, or undefined if it may. */
export function refusal(rule: AccessRule, caller: { kind: TokenKind | "replica"; role: Role | null }, method: string): string | undefined {
  if (rule.kind === "none") return undefined;
  if (caller.kind !== rule.kind) return `a ${caller.kind} token cannot call ${method}; it needs ${rule.kind === "agent" ? "an agent token" : rule.kind === "replica" ? "a coordinator replica's credential" : "a user token"}`;
  if (rule.kind === "user" && !roleAtLeast(caller.role, rule.role)) {
    return `${method} needs the ${rule.role} role${rule.role === "admin" ? "" : " or higher"}; token has ${caller.role ?? "no role"}`;
  }
  return undefined;
}
