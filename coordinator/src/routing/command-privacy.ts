import { createHash } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { ActionRecordSchema, OwnershipSchema, type ActionRecord, type Ownership } from "@farm/shared/gen/farm/v1/device_service_pb";
import type { ActivityRow } from "../activity/activity-log.js";
import type { Principal } from "../auth/token-store.js";

/**
 * Command text may hold secrets (CI tokens passed to a shell). It is shown
 * in full only to the token that ran it and to admins; anyone else sees the
 * command's name (its first word) and the sha256 of the text, enough to
 * tell commands apart and to check a guess, never to read one.
 */
export function maySeeCommand(viewer: Principal, caller: string): boolean {
  return viewer.admin || (viewer.kind === "user" && viewer.tokenName === caller);
}

/** "am start -n x/.Main --es token s3cr3t" -> "am [sha256:…]". */
export function redactCommand(command: string): string {
  const name = command.trim().split(/\s+/, 1)[0] ?? "";
  return `${name} [sha256:${sha256(command)}]`;
}

/** "persist.ci.token=s3cr3t" -> "persist.ci.token=[sha256:…]": the key is not secret, the value may be. */
export function redactSetprop(detail: string): string {
  const eq = detail.indexOf("=");
  return eq < 0 ? `[sha256:${sha256(detail)}]` : `${detail.slice(0, eq)}=[sha256:${sha256(detail.slice(eq + 1))}]`;
}

/**
 * The detail of an activity entry (RunShell: the command; SetProperty:
 * key=value) as this viewer may see it.
 */
export function activityDetailFor(viewer: Principal, entry: { command: string; caller: string; detail: string }): string {
  if (maySeeCommand(viewer, entry.caller)) return entry.detail;
  if (entry.command === "runShell") return redactCommand(entry.detail);
  if (entry.command === "setProperty") return redactSetprop(entry.detail);
  return entry.detail;
}

/** An activity entry as this viewer may see it. */
export function activityFor(viewer: Principal, row: ActivityRow): ActivityRow {
  const detail = activityDetailFor(viewer, row);
  return detail === row.detail ? row : { ...row, detail };
}

/** An ownership journal record as this viewer may see it. */
export function actionRecordFor(viewer: Principal, record: ActionRecord): ActionRecord {
  if ((record.kind !== "shell" && record.kind !== "setprop") || maySeeCommand(viewer, record.requestedBy)) return record;
  if (record.kind === "setprop") {
    let req: { key?: unknown; value?: unknown } = {};
    try {
      req = JSON.parse(record.requestJson) as typeof req;
    } catch {
      // Not the JSON a setprop journals: show nothing of it.
    }
    return create(ActionRecordSchema, { ...record, requestJson: JSON.stringify({ key: String(req.key ?? ""), valueSha256: sha256(String(req.value ?? "")), redacted: true }) });
  }
  let command = "";
  try {
    command = String((JSON.parse(record.requestJson) as { command?: unknown }).command ?? "");
  } catch {
    // Not the JSON a shell action journals: show nothing of it.
  }
  const name = command.trim().split(/\s+/, 1)[0] ?? "";
  return create(ActionRecordSchema, { ...record, requestJson: JSON.stringify({ command: name, commandSha256: sha256(command), redacted: true }) });
}

/** Every record in an ownership status, as this viewer may see them. */
export function ownershipFor(viewer: Principal, o: Ownership | undefined): Ownership | undefined {
  if (!o) return o;
  return create(OwnershipSchema, { ...o, unresolved: o.unresolved.map((r) => actionRecordFor(viewer, r)), recent: o.recent.map((r) => actionRecordFor(viewer, r)) });
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}
