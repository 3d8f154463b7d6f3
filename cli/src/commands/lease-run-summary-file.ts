import { rename, stat, writeFile } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { Errors } from "@farm/shared/errors";
import { CliError } from "../cli-error.js";
import type { LeaseRunSummary } from "./lease-run-summary.js";

/**
 * `--summary FILE`, resolved against the working directory. Its directory
 * must exist, and FILE must not be a directory: checked before a device is
 * leased, so a typo costs no lease.
 */
export async function summaryPath(given: string): Promise<string> {
  if (given.trim() === "") throw new CliError(Errors.INVALID_ARGUMENT, "--summary needs a file name", "summary");
  const file = resolve(given);
  const dir = await stat(dirname(file)).catch(() => undefined);
  if (!dir?.isDirectory()) throw new CliError(Errors.INVALID_ARGUMENT, `--summary ${given}: its directory ${dirname(file)} does not exist`, "summary");
  const existing = await stat(file).catch(() => undefined);
  if (existing?.isDirectory()) throw new CliError(Errors.INVALID_ARGUMENT, `--summary ${given} is a directory; give a file name`, "summary");
  return file;
}

/**
 * Written whole or not at all: a reader never sees half a document. A file
 * that is not a regular one (/dev/stderr, a FIFO) is written in place, never
 * replaced.
 */
export async function writeSummaryFile(file: string, summary: LeaseRunSummary): Promise<void> {
  const text = JSON.stringify(summary, null, 2) + "\n";
  const existing = await stat(file).catch(() => undefined);
  if (existing && !existing.isFile()) return writeFile(file, text);
  const tmp = join(dirname(file), `.${basename(file)}.${process.pid}.tmp`);
  await writeFile(tmp, text, { mode: 0o644 });
  await rename(tmp, file);
}
