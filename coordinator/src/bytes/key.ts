import { Errors, farmError } from "@farm/shared/errors";

const segment = /^[A-Za-z0-9._-]+$/;

/** A key is a relative path of plain names: never absolute, never `..`. */
export function checkKey(key: string): string {
  const parts = key.split("/");
  if (key.length > 512 || parts.some((p) => !segment.test(p) || p === "." || p === "..")) {
    throw farmError(Errors.INVALID_ARGUMENT, `bad stored file key ${JSON.stringify(key.slice(0, 80))}`, "key");
  }
  return key;
}
