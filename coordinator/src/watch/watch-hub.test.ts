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
});
