import { resumeStagedUploads, type StagedUploadDeps } from "./staged-uploads.js";

const FIRST_RETRY_MS = 2_000;
const MAX_RETRY_MS = 60_000;

let timer: NodeJS.Timeout | undefined;
let running = false;
/** A retry asked for while one was running: that pass may have skipped the new bundle. */
let again = false;

/**
 * Tries the staged bundles again after an upload the coordinator could not
 * take (its store full, say): soon, then with a doubling delay up to a
 * minute, until none is left worth trying. A bundle staged whole is thus
 * stored once the coordinator has room again, without waiting for the
 * agent to re-attach. One schedule per process; it never keeps it alive.
 */
export function retryStagedUploads(deps: StagedUploadDeps, delayMs = FIRST_RETRY_MS): void {
  if (running) {
    again = true;
    return;
  }
  if (timer) return;
  timer = setTimeout(() => {
    timer = undefined;
    running = true;
    void resumeStagedUploads(deps)
      .catch(() => ({ uploaded: 0, pending: 1 }))
      .then(({ pending }) => {
        running = false;
        const asked = again;
        again = false;
        if (asked) retryStagedUploads(deps);
        else if (pending > 0) retryStagedUploads(deps, Math.min(MAX_RETRY_MS, delayMs * 2));
      });
  }, delayMs);
  timer.unref();
}
