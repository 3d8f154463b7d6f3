import { timestampDate } from "@bufbuild/protobuf/wkt";
import { SessionStatus, type Session } from "@farm/shared/gen/farm/v1/session_service_pb";
import { h } from "./dom.js";
import { duration } from "./format.js";

/** The status words the CLI prints. */
export const STATUS_NAMES: [SessionStatus, string][] = [
  [SessionStatus.RUNNING, "running"],
  [SessionStatus.PASSED, "passed"],
  [SessionStatus.FAILED, "failed"],
  [SessionStatus.LEASE_ENDED, "lease-ended"],
];

export function statusName(s: SessionStatus): string {
  return STATUS_NAMES.find(([v]) => v === s)?.[1] ?? "unknown";
}

/** Start to end, or to now while it runs. */
export function sessionDuration(s: Session, now = Date.now()): string {
  if (!s.createTime) return "";
  const start = timestampDate(s.createTime).getTime();
  const end = s.endTime ? timestampDate(s.endTime).getTime() : now;
  return duration(end - start);
}

export const sessionHref = (id: string) => `#/test-sessions/${encodeURIComponent(id)}`;

const sessionInDetail = /\b([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b/;

/**
 * An activity entry's detail, with the session it names linked to its page
 * (startSession: "session <id> (name)", endSession: "session <id>: passed").
 */
export function activityDetail(command: string, detail: string): (Node | string)[] {
  const m = command === "startSession" || command === "endSession" ? sessionInDetail.exec(detail) : null;
  if (!m) return [detail];
  const id = m[1] as string;
  return [detail.slice(0, m.index), h("a", { href: sessionHref(id), "data-session-link": id }, id), detail.slice(m.index + id.length)];
}
