import { create, type JsonObject } from "@bufbuild/protobuf";
import type { CallOptions, Client } from "@connectrpc/connect";
import { Errors } from "@farm/shared/error-codes";
import { DeviceTargetSchema } from "@farm/shared/gen/farm/v1/device_service_pb";
import { SessionStatus, type Session, type SessionService, type SessionStep } from "@farm/shared/gen/farm/v1/session_service_pb";
import { allPages } from "./all-pages.js";
import { FarmError } from "./farm-error.js";

/** How a session ends when its holder says so (a released lease ends it as lease-ended). */
export type SessionEnd = "passed" | "failed";

/** A new session's name, context, OCR switch and capture policy (validated JSON) with its secrets. */
export interface SessionStartOptions {
  name?: string | undefined;
  context?: JsonObject | undefined;
  ocr?: boolean | undefined;
  policyJson?: string | undefined;
  secrets?: { name: string; value: string }[] | undefined;
}

/** Starts a session on a leased phone (the lease rides in the call options). */
export async function startSessionCall(client: Client<typeof SessionService>, target: { serial: string; agent?: string | undefined }, opts: SessionStartOptions, call: CallOptions): Promise<Session> {
  const res = await client.startSession(
    {
      target: create(DeviceTargetSchema, { serial: target.serial, agent: target.agent ?? "" }),
      name: opts.name ?? "",
      context: opts.context ?? {},
      ocr: opts.ocr ?? false,
      policyJson: opts.policyJson ?? "",
      secrets: opts.secrets ?? [],
    },
    call,
  );
  if (!res.session) throw new FarmError(Errors.INTERNAL, "the coordinator started no session", undefined, null);
  return res.session;
}

/** Ends a session as passed or failed. */
export async function endSessionCall(client: Client<typeof SessionService>, sessionId: string, status: SessionEnd, call: CallOptions): Promise<Session | undefined> {
  const res = await client.endSession({ sessionId, status: status === "passed" ? SessionStatus.PASSED : SessionStatus.FAILED }, call);
  return res.session;
}

/** Every step of a session's timeline, oldest first (all pages). */
export function sessionStepsCall(client: Client<typeof SessionService>, sessionId: string, call: CallOptions): Promise<SessionStep[]> {
  return allPages(async (page) => {
    const res = await client.listSessionSteps({ sessionId, ...page }, call);
    return { items: res.steps, nextPageToken: res.nextPageToken };
  });
}

/** Which sessions to list: every given field must match (as `farm session list`'s flags). */
export interface SessionFilter {
  /** The phone's serial. */
  serial?: string | undefined;
  status?: "running" | "passed" | "failed" | "lease-ended" | undefined;
  /** The user who started it. */
  owner?: string | undefined;
}

const statusOf: Readonly<Record<NonNullable<SessionFilter["status"]>, SessionStatus>> = {
  running: SessionStatus.RUNNING,
  passed: SessionStatus.PASSED,
  failed: SessionStatus.FAILED,
  "lease-ended": SessionStatus.LEASE_ENDED,
};

/** The sessions that match, newest first as the coordinator lists them (all pages). */
export function listSessionsCall(client: Client<typeof SessionService>, filter: SessionFilter, call: CallOptions): Promise<Session[]> {
  if (filter.status !== undefined && !(filter.status in statusOf)) throw new FarmError(Errors.INVALID_ARGUMENT, `status must be one of ${Object.keys(statusOf).join(", ")}, got ${String(filter.status)}`, "status");
  const request = { serial: filter.serial ?? "", status: filter.status ? statusOf[filter.status] : SessionStatus.UNSPECIFIED, owner: filter.owner ?? "" };
  return allPages(async (page) => {
    const res = await client.listSessions({ ...request, ...page }, call);
    return { items: res.sessions, nextPageToken: res.nextPageToken };
  });
}
