import { Errors, farmError } from "@farm/shared/errors";
import type { LeaseManager } from "../leases/lease-manager.js";
import type { LeaseRow } from "../leases/lease-store.js";
import type { LiveFeeds, SharedFeed } from "./live-feeds.js";

/** One viewer's queue on a shared feed, consumed as the events of its call. */
export interface FeedViewer<T> extends AsyncIterable<T> {
  end(err: Error | null): void;
}

/**
 * One viewer of a phone's feed: joins the phone's one feed on this replica
 * (started by `start` on first use), and ends with `lease` unless the viewer
 * is an admin.
 */
export async function* watchLiveFeed<F extends SharedFeed<V>, V extends FeedViewer<T>, T>(
  feeds: LiveFeeds<F, V>,
  leases: Pick<LeaseManager, "events" | "storedLeaseOf">,
  physicalId: string,
  start: (streamId: string) => Promise<void>,
  viewer: V,
  principal: { admin: boolean },
  lease: LeaseRow | undefined,
  signal: AbortSignal,
): AsyncGenerator<T> {
  const running = await feeds.feedFor(physicalId, start);
  const leaseEnded = (ended: LeaseRow) => farmError(ended.state === "expired" ? Errors.LEASE_EXPIRED : Errors.LEASE_RELEASED, `the lease on ${ended.physicalId} ended: the ${feeds.what} is closed`, "lease");
  // The holder's view ends with their lease (an admin's does not).
  const onLeaseEnded = (ended: LeaseRow) => {
    if (!principal.admin && ended.leaseId === lease?.leaseId) viewer.end(leaseEnded(ended));
  };
  const onAbort = () => viewer.end(null);
  leases.events.on("leaseEnded", onLeaseEnded);
  signal.addEventListener("abort", onAbort, { once: true });
  running.feed.join(viewer);
  try {
    // The lease may have ended while the feed started (as the database has it: on a replica, a lease granted
    // through another one may not have reached this one's memory yet).
    if (lease && !principal.admin && (await leases.storedLeaseOf(physicalId))?.leaseId !== lease.leaseId) viewer.end(leaseEnded({ ...lease, state: "released" }));
    yield* viewer;
  } finally {
    leases.events.off("leaseEnded", onLeaseEnded);
    signal.removeEventListener("abort", onAbort);
    feeds.left(physicalId, running, viewer);
  }
}
