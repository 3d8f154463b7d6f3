import { Errors, farmError } from "../errors.js";
import { DocumentError } from "../capture-policy/schema-errors.js";
import { parseText, sourceOfPath } from "../capture-policy/document.js";

/** A setting put back when a lease ends (`settings put NAMESPACE KEY VALUE`). */
export interface CleanupSettingValue {
  namespace: "system" | "secure" | "global";
  key: string;
  value: string;
}

/** A site's cleanup policy (`farm coordinator --cleanup FILE`), validated. */
export interface CleanupPolicyDoc {
  /** The whole cleanup of one phone; past it the phone is marked needs-attention. */
  timeoutMs: number;
  uninstallInstalled: boolean;
  keepPackages: string[];
  clearData: string[];
  removeNewFilesUnder: string[];
  settings: CleanupSettingValue[];
  airplaneModeOff: boolean;
  pressHome: boolean;
}

export const CLEANUP_POLICY_MAX_BYTES = 64 * 1024;
const MAX_LIST = 200;
const PACKAGE = /^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$/;
const SETTING_KEY = /^[A-Za-z0-9_.-]{1,128}$/;
// A value reaches a device shell (quoted); control characters have no place in a setting.
const SETTING_VALUE = /^[^\x00-\x1f\x7f]{0,256}$/;
const NAMESPACES = ["system", "secure", "global"] as const;
const KEYS = ["version", "timeoutSeconds", "uninstallInstalled", "keepPackages", "clearData", "removeNewFilesUnder", "settings", "airplaneModeOff", "pressHome"];

/**
 * Reads a cleanup policy from its text (YAML, or JSON for a .json path).
 * Every problem is a CLEANUP_POLICY_INVALID error naming the field, so the
 * coordinator refuses to start on a policy it would apply wrongly.
 */
export function parseCleanupPolicy(text: string, path = "cleanup.yaml"): CleanupPolicyDoc {
  let doc: unknown;
  try {
    doc = parseText(text, sourceOfPath(path), "cleanup policy", CLEANUP_POLICY_MAX_BYTES);
  } catch (err) {
    if (!(err instanceof DocumentError)) throw err;
    const first = err.problems[0];
    throw invalid(first?.path ?? "(file)", `${path}: ${first?.message ?? err.message}`);
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) throw invalid("(file)", `${path}: a cleanup policy is a mapping (version: 1, ...)`);
  const o = doc as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!KEYS.includes(k)) throw invalid(k, `unknown key "${k}"; known: ${KEYS.join(", ")}`);
  }
  if (o["version"] !== 1) throw invalid("version", "version must be 1");
  return {
    timeoutMs: seconds(o["timeoutSeconds"], "timeoutSeconds", 120) * 1000,
    uninstallInstalled: bool(o["uninstallInstalled"], "uninstallInstalled", true),
    keepPackages: list(o["keepPackages"], "keepPackages", packageName),
    clearData: list(o["clearData"], "clearData", packageName),
    removeNewFilesUnder: list(o["removeNewFilesUnder"], "removeNewFilesUnder", directory),
    settings: settings(o["settings"]),
    airplaneModeOff: bool(o["airplaneModeOff"], "airplaneModeOff", true),
    pressHome: bool(o["pressHome"], "pressHome", true),
  };
}

function invalid(field: string, message: string) {
  return farmError(Errors.CLEANUP_POLICY_INVALID, `cleanup policy: ${field}: ${message}`, field);
}

function seconds(v: unknown, field: string, dflt: number): number {
  if (v === undefined) return dflt;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 5 || v > 1800) throw invalid(field, "must be a whole number of seconds from 5 to 1800");
  return v;
}

function bool(v: unknown, field: string, dflt: boolean): boolean {
  if (v === undefined) return dflt;
  if (typeof v !== "boolean") throw invalid(field, "must be true or false");
  return v;
}

function list(v: unknown, field: string, check: (item: unknown, field: string) => string): string[] {
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw invalid(field, "must be a list");
  if (v.length > MAX_LIST) throw invalid(field, `at most ${MAX_LIST} entries`);
  return v.map((item, i) => check(item, `${field}[${i}]`));
}

function packageName(v: unknown, field: string): string {
  if (typeof v !== "string" || !PACKAGE.test(v) || v.length > 255) throw invalid(field, `must be an Android package name (com.example.app), got ${JSON.stringify(v)}`);
  return v;
}

function directory(v: unknown, field: string): string {
  if (typeof v !== "string" || !v.startsWith("/") || v.length > 512) throw invalid(field, `must be an absolute directory on the phone, got ${JSON.stringify(v)}`);
  const parts = v.split("/").filter(Boolean);
  if (parts.length === 0) throw invalid(field, "the root directory is not a place to remove new files from");
  if (parts.some((p) => p === "." || p === "..")) throw invalid(field, "no . or .. in the path");
  if (/[\x00-\x1f\x7f]/.test(v)) throw invalid(field, "no control characters in the path");
  return `/${parts.join("/")}`;
}

function settings(v: unknown): CleanupSettingValue[] {
  if (v === undefined) return [];
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw invalid("settings", "must be a mapping of namespace (system, secure, global) to key: value");
  const out: CleanupSettingValue[] = [];
  for (const [ns, entries] of Object.entries(v as Record<string, unknown>)) {
    if (!(NAMESPACES as readonly string[]).includes(ns)) throw invalid(`settings.${ns}`, `unknown namespace; one of ${NAMESPACES.join(", ")}`);
    if (typeof entries !== "object" || entries === null || Array.isArray(entries)) throw invalid(`settings.${ns}`, "must be a mapping of key: value");
    for (const [key, raw] of Object.entries(entries as Record<string, unknown>)) {
      const field = `settings.${ns}.${key}`;
      if (!SETTING_KEY.test(key)) throw invalid(field, "a setting key is letters, digits, _ . - (at most 128)");
      if (typeof raw !== "string" && typeof raw !== "number" && typeof raw !== "boolean") throw invalid(field, "must be a string or a number");
      const value = String(raw);
      if (!SETTING_VALUE.test(value)) throw invalid(field, "at most 256 characters, no control characters");
      out.push({ namespace: ns as CleanupSettingValue["namespace"], key, value });
    }
  }
  if (out.length > MAX_LIST) throw invalid("settings", `at most ${MAX_LIST} settings`);
  return out;
}
