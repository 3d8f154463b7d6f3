import { once } from "node:events";
import { afterEach, describe, expect, it } from "vitest";
import { createLogger } from "@farm/shared/log";
import type { FarmDatabase } from "../db/database.js";
import { dialects, openTestDatabase } from "../db/testing/test-database.js";
import { Membership } from "./membership.js";
import { reclaimAgents } from "./replication.js";
import { createReplicaStore } from "../db/stores.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const log = createLogger({ level: "error" });

describe.each(dialects)("a replica expired by another while still alive (%s)", (dialect) => {
  it("registers again, says so, and takes back the agents it still holds that nobody else took", async () => {
    const database: FarmDatabase = await openTestDatabase(dialect);
    cleanups.push(() => database.close());
    const store = createReplicaStore(database);
    const stalled = await Membership.join(store, { url: "http://one", log, heartbeatMs: 20 });
    cleanups.push(() => stalled.leave());
    await store.setAgentReplica({ agentId: "kept", replicaId: stalled.id, tokenName: "lab-1", since: 1 });
    await store.setAgentReplica({ agentId: "moved", replicaId: stalled.id, tokenName: "lab-2", since: 1 });
    const rejoined = once(stalled.events, "rejoined");
    // A replica whose clock runs 10 s ahead sees the first one's heartbeats as stale, as after a long stall.
    const other = await Membership.join(store, { url: "http://two", log, heartbeatMs: 20, now: () => Date.now() + 10_000 });
    cleanups.push(() => other.leave());
    await rejoined;
    // The other stops (so it expires nothing more); the first is registered again. A beat of the
    // other's already under way may have expired it once more: then its own next beat brings it back.
    const again = once(stalled.events, "rejoined");
    await other.leave();
    if (!(await store.list()).some((r) => r.id === stalled.id)) await again;
    expect((await store.list()).map((r) => r.id)).toContain(stalled.id);
    expect(await store.agentReplica("kept")).toBeUndefined();
    // Meanwhile one agent reconnected to a third replica; the expiry dropped the first replica's rows.
    await store.setAgentReplica({ agentId: "moved", replicaId: "third", tokenName: "lab-2", since: 2 });
    const taken = await reclaimAgents(store, stalled.id, [{ agentId: "kept", tokenName: "lab-1" }, { agentId: "moved", tokenName: "lab-2" }]);
    expect(taken).toEqual(["kept"]);
    expect((await store.agentReplica("kept"))?.replicaId).toBe(stalled.id);
    expect((await store.agentReplica("moved"))?.replicaId).toBe("third");
  });
});

describe.each(dialects)("a replica's credential (%s)", (dialect) => {
  it("is accepted while that replica is live with that secret, refused with another secret and once the replica has left, also after it was accepted before", async () => {
    const database: FarmDatabase = await openTestDatabase(dialect);
    cleanups.push(() => database.close());
    const store = createReplicaStore(database);
    const here = await Membership.join(store, { url: "http://here", log, heartbeatMs: 20 });
    cleanups.push(() => here.leave());
    const other = await Membership.join(store, { url: "http://other", log, heartbeatMs: 20 });
    const credential = other.credential();
    // Twice: the second answer comes from what the first proved.
    expect(await here.verify(credential)).toBe(other.id);
    expect(await here.verify(credential)).toBe(other.id);
    const forged = `${credential.slice(0, -4)}${credential.endsWith("AAAA") ? "BBBB" : "AAAA"}`;
    expect(await here.verify(forged)).toBeUndefined();
    const gone = once(here.events, "gone");
    await other.leave();
    await gone;
    expect(await here.verify(credential)).toBeUndefined();
  });
});
