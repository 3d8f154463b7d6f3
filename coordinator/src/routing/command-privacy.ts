import { create } from "@bufbuild/protobuf";
import { ActionRecordSchema, OwnershipSchema, type ActionRecord, type Ownership } from "@farm/shared/gen/farm/v1/device_service_pb";
import type { ActivityRow } from "../activity/activity-log.js";
import type { Summarizer } from "../auth/summary-key.js";
import type { Principal } from "../auth/token-store.js";

/**
 * Command text, property values and typed text may hold secrets (CI tokens
 * passed to a shell, a password typed into a login form). They are shown in
 * full only to the token that sent them and to admins; anyone else sees what
 * kind of thing it was and a keyed hash of it (summary-key.ts): enough to
 * tell two apart, never to read one or to test a guess.
 */
export function maySeeCommand(viewer: Principal, caller: string): boolean {
  return viewer.admin || (viewer.kind === "user" && viewer.tokenName === caller);
}

/** "am start -n x/.Main --es token s3cr3t" -> "am [hmac:…]". */
export function redactCommand(command: string, key: Summarizer): string {
  const name = command.trim().split(/\s+/, 1)[0] ?? "";
  return `${name} [hmac:${key.summarize(command)}]`;
}

/** "persist.ci.token=s3cr3t" -> "persist.ci.token=[hmac:…]": the key is not secret, the value may be. */
export function redactSetprop(detail: string, key: Summarizer): string {
  const eq = detail.indexOf("=");
  return eq < 0 ? `[hmac:${key.summarize(detail)}]` : `${detail.slice(0, eq)}=[hmac:${key.summarize(detail.slice(eq + 1))}]`;
}

/** "MyP4ssw0rd" -> "[10 chars, hmac:…]": how long it was, and a keyed hash. */
export function redactTyped(text: string, key: Summarizer): string {
  return `[${[...text].length} chars, hmac:${key.summarize(text)}]`;
}

/**
 * Keys that type nothing: shown to everyone. Any other key (a digit, a
 * letter, a code by number) may be one character of a PIN typed key by key.
 */
const NAMED_KEYS = new Set(
  [
    "HOME",
    "BACK",
    "MENU",
    "APP_SWITCH",
    "POWER",
    "WAKEUP",
    "SLEEP",
    "VOLUME_UP",
    "VOLUME_DOWN",
    "VOLUME_MUTE",
    "ENTER",
    "TAB",
    "ESCAPE",
    "DEL",
    "FORWARD_DEL",
    "DPAD_UP",
    "DPAD_DOWN",
    "DPAD_LEFT",
    "DPAD_RIGHT",
    "DPAD_CENTER",
    "MOVE_HOME",
    "MOVE_END",
    "PAGE_UP",
    "PAGE_DOWN",
    "SEARCH",
    "NOTIFICATION",
    "SETTINGS",
    "CAMERA",
  ].map((k) => `KEYCODE_${k}`),
);

/** Whether an input key is typed text (anything but a named key that types nothing). */
export function isTypedKey(key: string): boolean {
  return !NAMED_KEYS.has(key);
}

/** What a SendInput asked, for the activity log (`text …` and `key …` are redacted for other viewers). */
export function inputDetail(req: { kind?: { case?: string; value?: unknown } }): string {
  const k = req.kind;
  switch (k?.case) {
    case "text":
      // The agent refuses text over 1000 characters.
      return `text ${String(k.value).slice(0, 1000)}`;
    case "key":
      return `key ${String(k.value).slice(0, 64)}`;
    case "tap": {
      const t = k.value as { x?: number; y?: number; element?: { by?: { case?: string; value?: unknown } } };
      const by = t.element?.by;
      return by?.case ? `tap ${by.case}=${JSON.stringify(String(by.value).slice(0, 100))}` : `tap ${t.x ?? 0},${t.y ?? 0}`;
    }
    case "swipe": {
      const s = k.value as { x1?: number; y1?: number; x2?: number; y2?: number };
      return `swipe ${s.x1 ?? 0},${s.y1 ?? 0} -> ${s.x2 ?? 0},${s.y2 ?? 0}`;
    }
    default:
      return "";
  }
}

/** A SendInput's activity detail as someone who may not read typed text sees it. */
function redactInputDetail(detail: string, key: Summarizer): string {
  if (detail.startsWith("text ")) return `text ${redactTyped(detail.slice(5), key)}`;
  if (detail.startsWith("key ") && isTypedKey(detail.slice(4))) return `key ${redactTyped(detail.slice(4), key)}`;
  return detail;
}

/**
 * The detail of an activity entry (RunShell: the command; SetProperty:
 * key=value; SendInput: text or key) as this viewer may see it.
 */
export function activityDetailFor(viewer: Principal, entry: { command: string; caller: string; detail: string }, key: Summarizer): string {
  if (maySeeCommand(viewer, entry.caller)) return entry.detail;
  if (entry.command === "runShell") return redactCommand(entry.detail, key);
  if (entry.command === "setProperty") return redactSetprop(entry.detail, key);
  if (entry.command === "sendInput") return redactInputDetail(entry.detail, key);
  return entry.detail;
}

/** An activity entry as this viewer may see it. */
export function activityFor(viewer: Principal, row: ActivityRow, key: Summarizer): ActivityRow {
  const detail = activityDetailFor(viewer, row, key);
  return detail === row.detail ? row : { ...row, detail };
}

/**
 * The request of an ownership journal record, as JSON, for someone who may
 * not read it; undefined when nothing in it is secret.
 */
function redactedRequest(kind: string, requestJson: string, key: Summarizer): string | undefined {
  if (kind !== "shell" && kind !== "setprop" && kind !== "input") return undefined;
  let req: Record<string, unknown> | undefined;
  try {
    const parsed: unknown = JSON.parse(requestJson);
    if (typeof parsed === "object" && parsed !== null) req = parsed as Record<string, unknown>;
  } catch {
    // Not the JSON this kind journals: show nothing of it (below).
  }
  if (!req) return JSON.stringify({ redacted: true });
  if (kind === "setprop") return JSON.stringify({ key: String(req["key"] ?? ""), valueHmac: key.summarize(String(req["value"] ?? "")), redacted: true });
  if (kind === "shell") {
    const command = String(req["command"] ?? "");
    return JSON.stringify({ command: command.trim().split(/\s+/, 1)[0] ?? "", commandHmac: key.summarize(command), redacted: true });
  }
  const typed = req["kind"] === "text" ? String(req["text"] ?? "") : req["kind"] === "key" && isTypedKey(String(req["key"] ?? "")) ? String(req["key"]) : undefined;
  if (typed === undefined) return undefined;
  return JSON.stringify({ kind: req["kind"], length: [...typed].length, [`${String(req["kind"])}Hmac`]: key.summarize(typed), redacted: true });
}

/** An ownership journal record as this viewer may see it. */
export function actionRecordFor(viewer: Principal, record: ActionRecord, key: Summarizer): ActionRecord {
  if (maySeeCommand(viewer, record.requestedBy)) return record;
  const requestJson = redactedRequest(record.kind, record.requestJson, key);
  if (requestJson === undefined) return record;
  // The request's plain sha256 would let a guess be tested: it goes too.
  return create(ActionRecordSchema, { ...record, requestJson, requestSha256: "" });
}

/** Every record in an ownership status, as this viewer may see them. */
export function ownershipFor(viewer: Principal, o: Ownership | undefined, key: Summarizer): Ownership | undefined {
  if (!o) return o;
  return create(OwnershipSchema, { ...o, unresolved: o.unresolved.map((r) => actionRecordFor(viewer, r, key)), recent: o.recent.map((r) => actionRecordFor(viewer, r, key)) });
}
