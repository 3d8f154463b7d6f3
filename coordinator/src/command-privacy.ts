import { createHash } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { ActionRecordSchema, OwnershipSchema, type ActionRecord, type Ownership } from "@farm/shared/gen/farm/v1/device_service_pb";
import type { ActivityRow } from "./activity-log.js";
import type { Principal } from "./token-store.js";

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

/** An activity entry as this viewer may see it (the shell command's text is the entry's detail). */
export function activityFor(viewer: Principal, row: ActivityRow): ActivityRow {
  if (row.command !== "runShell" || maySeeCommand(viewer, row.caller)) return row;
  return { ...row, detail: redactCommand(row.detail) };
}

/** An ownership journal record as this viewer may see it. */
export function actionRecordFor(viewer: Principal, record: ActionRecord): ActionRecord {
  if (record.kind !== "shell" || maySeeCommand(viewer, record.requestedBy)) return record;
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
