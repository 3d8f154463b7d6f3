import { setTimeout as delay } from "node:timers/promises";

/**
 * Polls a condition for state that has no event to await (e.g. a process
 * showing up in `ps` through adb); resolves to its first truthy value.
 */
export async function waitUntil<T>(probe: () => Promise<T | undefined | false> | T | undefined | false, options: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${options.what ?? "condition"}`);
    await delay(options.intervalMs ?? 50);
  }
}
