import { existsSync, statSync } from "node:fs";
import { dirname, parse, resolve, sep } from "node:path";
import { Errors, invalidArgument, refusal } from "./errors.js";

export const LABEL_MAX_UTF16 = 2048;
export const CONTEXT_MAX_BYTES = 16 * 1024;
export const TIMEOUT_MIN_MS = 1_000;
export const TIMEOUT_MAX_MS = 120_000;
export const TIMEOUT_DEFAULT_MS = 30_000;

/** Field names as the CLI spells its flags, so errors point at the flag. */
export const evidenceFields = {
  outputDir: "output-dir",
  label: "label",
  context: "context-json",
  timeout: "timeout",
  appPackage: "app-package",
} as const;

/** A label: null when absent; "" is valid; at most 2048 UTF-16 code units. */
export function validateLabel(label: string | null | undefined): string | null {
  if (label === undefined || label === null) return null;
  // JS string length counts UTF-16 code units: an astral character is two.
  if (label.length > LABEL_MAX_UTF16) {
    throw invalidArgument(evidenceFields.label, `label is ${label.length} UTF-16 code units; at most ${LABEL_MAX_UTF16} are allowed`);
  }
  return label;
}

/** Context: a JSON object (not an array or null), at most 16 KiB as UTF-8. */
export function validateContext(json: string | undefined): Record<string, unknown> {
  if (json === undefined || json === "") return {};
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    throw invalidArgument(evidenceFields.context, `context is not valid JSON: ${(err as Error).message}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw invalidArgument(evidenceFields.context, `context must be a JSON object, got ${value === null ? "null" : Array.isArray(value) ? "an array" : typeof value}`);
  }
  const bytes = Buffer.byteLength(JSON.stringify(value), "utf8");
  if (bytes > CONTEXT_MAX_BYTES) {
    throw invalidArgument(evidenceFields.context, `context is ${bytes} bytes as UTF-8 JSON; at most ${CONTEXT_MAX_BYTES} are allowed`);
  }
  return value as Record<string, unknown>;
}

/** Timeout: an integer 1000..120000 ms; undefined means the default. */
export function validateTimeout(value: string | number | undefined): number {
  if (value === undefined || value === "") return TIMEOUT_DEFAULT_MS;
  const text = String(value).trim();
  if (!/^\d+$/.test(text)) throw invalidArgument(evidenceFields.timeout, `timeout must be an integer number of milliseconds, got "${String(value)}"`);
  const n = Number(text);
  if (n < TIMEOUT_MIN_MS || n > TIMEOUT_MAX_MS) {
    throw invalidArgument(evidenceFields.timeout, `timeout must be within ${TIMEOUT_MIN_MS}..${TIMEOUT_MAX_MS} ms, got ${n}`);
  }
  return n;
}

const packagePattern = /^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$/;

export function validateAppPackage(pkg: string | undefined): string {
  if (pkg === undefined || pkg === "") return "";
  if (!packagePattern.test(pkg) || pkg.length > 255) {
    throw invalidArgument(evidenceFields.appPackage, `"${pkg}" is not an Android package name`);
  }
  return pkg;
}

/**
 * The destination of a bundle on this machine, as an absolute path: a relative
 * dir is taken from the working directory, as any command-line tool does. Not
 * blank, not a filesystem root, no ".." segments, not existing yet, with an
 * existing parent directory. Checked before any device or file is touched.
 */
export function validateOutputDir(dir: string | undefined): string {
  const field = evidenceFields.outputDir;
  if (dir === undefined || dir.trim() === "") throw invalidArgument(field, "output dir must not be blank");
  if (dir.split(/[\\/]+/).includes("..")) throw invalidArgument(field, `output dir must not contain ".." segments, got "${dir}"`);
  const full = resolve(dir);
  if (parse(full).root === full || full === sep) throw invalidArgument(field, "output dir must not be a filesystem root");
  if (existsSync(full)) {
    throw refusal(Errors.EVIDENCE_OUTPUT_EXISTS, `output dir ${full} already exists; a new capture needs a new directory`, field);
  }
  const parent = dirname(full);
  let isDir = false;
  try {
    isDir = statSync(parent).isDirectory();
  } catch {
    isDir = false;
  }
  if (!isDir) throw invalidArgument(field, `the parent of the output dir, ${parent}, does not exist or is not a directory`);
  return full;
}
