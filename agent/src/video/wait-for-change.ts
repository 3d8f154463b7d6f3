import { watch, type FSWatcher } from "node:fs";

/**
 * Re-runs `check` whenever `dir` changes, and at least every pollMs (inotify
 * misses some changes, such as a directory created after the watch), until
 * it returns a value, timeoutMs passes, or the signal aborts.
 */
export async function waitForChange<T>(dir: string, check: () => Promise<T | undefined>, opts: { timeoutMs: number; pollMs?: number; signal?: AbortSignal }): Promise<T | undefined> {
  const until = Date.now() + Math.max(0, opts.timeoutMs);
  let wake: (() => void) | undefined;
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dir, () => wake?.());
  } catch {
    // Not there yet: the poll covers it.
  }
  const onAbort = () => wake?.();
  opts.signal?.addEventListener("abort", onAbort);
  try {
    for (;;) {
      const value = await check();
      if (value !== undefined) return value;
      const left = until - Date.now();
      if (left <= 0 || opts.signal?.aborted) return undefined;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(opts.pollMs ?? 250, left));
        wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
    }
  } finally {
    opts.signal?.removeEventListener("abort", onAbort);
    watcher?.close();
  }
}
