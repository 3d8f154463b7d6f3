import { describe, expect, it } from "vitest";
import { WatchHub } from "./watch-hub.js";

describe("watch hub", () => {
  it("sends ready first, then every event published after subscribing, in order", async () => {
    const hub = new WatchHub();
    hub.publish({ case: "deviceRemoved", value: { agentId: "a", serial: "before" } });
    const ac = new AbortController();
    const it = hub.subscribe(ac.signal);
    expect((await it.next()).value?.kind.case).toBe("ready");
    hub.publish({ case: "deviceRemoved", value: { agentId: "a", serial: "one" } });
    hub.publish({ case: "deviceRemoved", value: { agentId: "a", serial: "two" } });
    const got = [(await it.next()).value, (await it.next()).value].map((m) => (m?.kind.case === "deviceRemoved" ? m.kind.value.serial : m?.kind.case));
    expect(got).toEqual(["one", "two"]);
    ac.abort();
    expect((await it.next()).done).toBe(true);
    expect(hub.size).toBe(0);
  });

  it("cuts off a watcher that falls too far behind instead of buffering without bound", async () => {
    const hub = new WatchHub();
    const ac = new AbortController();
    const it = hub.subscribe(ac.signal);
    await it.next();
    for (let i = 0; i < 20_001; i++) hub.publish({ case: "deviceRemoved", value: { agentId: "a", serial: String(i) } });
    let error: unknown;
    try {
      for (;;) if ((await it.next()).done) break;
    } catch (err) {
      error = err;
    }
    expect(String(error)).toMatch(/fell too far behind/);
    expect(hub.size).toBe(0);
  });

  it("ends every watcher at once when told what they saw may be incomplete, waiting or not, and keeps no subscriber", async () => {
    const hub = new WatchHub();
    const waiting = hub.subscribe(new AbortController().signal);
    const behind = hub.subscribe(new AbortController().signal);
    await waiting.next();
    await behind.next();
    hub.publish({ case: "deviceRemoved", value: { agentId: "a", serial: "queued" } });
    // One is parked waiting for the next event; the other has one queued.
    const parked = waiting.next().then((r) => r.value?.kind.case);
    expect(await parked).toBe("deviceRemoved");
    const next = waiting.next();
    hub.cutAll(new Error("missed changes; re-read"));
    await expect(next).rejects.toThrow(/missed changes/);
    await expect(behind.next()).rejects.toThrow(/missed changes/);
    expect(hub.size).toBe(0);
  });
});
