import type { Client } from "@connectrpc/connect";
import type { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { progressShown, startProgress, type ProgressContext } from "./progress.js";

const POLL_MS = 1_000;

/**
 * While a lease request waits, shows its place in the coordinator's queue
 * (the lease list's queue, found by the request's ticket) and how long it
 * has waited. Only where progress is shown; nothing is polled otherwise.
 */
export async function followQueue(ctx: ProgressContext, client: Client<typeof LeaseService>, ticket: string): Promise<{ stop(): Promise<void> }> {
  if (!progressShown(ctx.format, ctx.env, ctx.stderrIsTty)) return { stop: async () => undefined };
  const progress = await startProgress(ctx, "waiting for a device");
  const started = Date.now();
  let running = true;
  let wake: () => void = () => undefined;
  const loop = (async () => {
    while (running) {
      const waited = Math.round((Date.now() - started) / 1000);
      const queue = await client.listLeases({ pageSize: 1 }, { timeoutMs: 5_000 }).then((r) => r.queue, () => undefined);
      const at = queue?.findIndex((w) => w.ticket === ticket) ?? -1;
      if (!running) break;
      progress.update(queue && at >= 0 ? `waiting for a device: position ${at + 1} of ${queue.length} in the queue, ${waited}s` : `waiting for a device: ${waited}s`);
      await new Promise<void>((r) => {
        wake = r;
        setTimeout(r, POLL_MS);
      });
    }
  })();
  return {
    async stop() {
      running = false;
      wake();
      await loop;
      progress.stop();
    },
  };
}
