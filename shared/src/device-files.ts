import { invalidArgument } from "./errors.js";

/** Where files may be pushed to and pulled from on a phone (a path under one of these). */
export const DEVICE_FILE_DIRS = ["/sdcard/Download/"] as const;
/** The largest file pushed or pulled (APKs go through install; this is for data files). */
export const DEVICE_FILE_MAX_BYTES = 256 * 1024 * 1024;
const PATH_MAX_CHARS = 512;
// One path segment: what a person names a file, without anything a shell or adb would read twice.
const SEGMENT = /^[A-Za-z0-9._ +@()-]{1,128}$/;

/**
 * Checks a phone file path for PushFile and PullFile before any phone is
 * touched: under an allowed directory, no "." or ".." segment, no empty
 * segment, plain characters only. Returns the path.
 */
export function checkDeviceFilePath(path: string, field = "path"): string {
  const bad = (why: string) => invalidArgument(field, `${field} ${why}`);
  if (path.length === 0 || path.length > PATH_MAX_CHARS) throw bad(`must be 1..${PATH_MAX_CHARS} characters`);
  const dir = DEVICE_FILE_DIRS.find((d) => path.startsWith(d));
  if (!dir) throw bad(`must be under ${DEVICE_FILE_DIRS.join(" or ")}`);
  const segments = path.slice(dir.length).split("/");
  for (const s of segments) {
    if (s === "." || s === "..") throw bad("may not hold \".\" or \"..\"");
    if (!SEGMENT.test(s)) throw bad("segments are 1..128 of A-Z a-z 0-9 . _ - + @ ( ) and space, and it names a file");
  }
  return path;
}
