import { QuietError } from "../quiet-error.js";

/** Linux errno values the simulator reports (sync STA2/LST2 carry them raw). */
export const ERRNO = {
  EPERM: 1,
  ENOENT: 2,
  EACCES: 13,
  EEXIST: 17,
  ENOTDIR: 20,
  EISDIR: 21,
  EINVAL: 22,
  ENOSPC: 28,
  EROFS: 30,
  ENOTEMPTY: 39,
  ELOOP: 40,
} as const;

export type ErrnoCode = keyof typeof ERRNO;

/** strerror() texts, as bionic prints them. */
const MESSAGES: Record<ErrnoCode, string> = {
  EPERM: "Operation not permitted",
  ENOENT: "No such file or directory",
  EACCES: "Permission denied",
  EEXIST: "File exists",
  ENOTDIR: "Not a directory",
  EISDIR: "Is a directory",
  EINVAL: "Invalid argument",
  ENOSPC: "No space left on device",
  EROFS: "Read-only file system",
  ENOTEMPTY: "Directory not empty",
  ELOOP: "Too many symbolic links encountered",
};

/** A failed file operation; `message` is the bare strerror text. */
export class FsError extends QuietError {
  override name = "FsError";
  readonly errno: number;
  constructor(
    readonly code: ErrnoCode,
    readonly path: string,
  ) {
    super(MESSAGES[code]);
    this.errno = ERRNO[code];
  }
}

export function strerror(code: ErrnoCode): string {
  return MESSAGES[code];
}
