import { afterEach, describe, expect, it, vi } from "vitest";
import { Errors, farmError } from "@farm/shared/errors";
import type { WatchResponse } from "@farm/shared/gen/farm/v1/watch_service_pb";
import { tunnelEntry } from "../adb-tunnels/testing/tunnel-entry.js";
import { DEFAULT_TUNNEL_LIMITS, TUNNEL_UPDATE_MS, Tunnels, type TunnelEntry } from "../adb-tunnels/tunnels.js";
import { WatchHub } from "./watch-hub.js";
import { watchTunnels } from "./tunnel-watch.js";

afterEach(() => {
  vi.useRealTimers();
});

const listening = (t: Tunnels) => (["opened", "updated", "closed"] as const).map((e) => t.events.listenerCount(e));

describe("tunnels on the watch stream", () => {
  it("sends a tunnel when it opens and its key and reason when it closes, listening only while someone watches", async () => {
    const tunnels = new Tunnels();
    const hub = new WatchHub();
    watchTunnels(hub, tunnels);
    expect(listening(tunnels)).toEqual([0, 0, 0]);

    const ac = new AbortController();
    const watch = hub.subscribe(ac.signal);
    expect((await watch.next()).value?.kind.case).toBe("ready");
    expect(listening(tunnels)).toEqual([1, 1, 1]);

    const t = tunnelEntry("t-1", "alice", "pd-1");
    tunnels.add(t);
    const opened = (await watch.next()).value as WatchResponse;
    expect(opened.kind.case === "tunnel" && opened.kind.value).toMatchObject({ tunnelId: "t-1", owner: "alice", physicalId: "pd-1", bytesToDevice: 10n, bytesFromDevice: 20n, openStreams: 0 });

    t.bytesFromDevice += 5;
    tunnels.touched(t);
    const updated = (await watch.next()).value as WatchResponse;
    expect(updated.kind.case === "tunnel" && updated.kind.value).toMatchObject({ tunnelId: "t-1", bytesFromDevice: 25n });

    tunnels.remove("t-1", farmError(Errors.TUNNEL_CLOSED, "closed by the admin root"));
    const closed = (await watch.next()).value as WatchResponse;
    expect(closed.kind).toEqual({ case: "tunnelClosed", value: expect.objectContaining({ tunnelId: "t-1", physicalId: "pd-1", reason: "closed by the admin root" }) });

    ac.abort();
    expect((await watch.next()).done).toBe(true);
    expect(listening(tunnels)).toEqual([0, 0, 0]);
  });

  it("tells byte changes at most once per 2 s per tunnel, the latest counts last, and costs nothing unwatched", () => {
    vi.useFakeTimers();
    const tunnels = new Tunnels(DEFAULT_TUNNEL_LIMITS);
    const a = tunnelEntry("t-a", "alice", "pd-1");
    const b = tunnelEntry("t-b", "bob", "pd-2");
    tunnels.add(a);
    tunnels.add(b);

    // Nobody listening: no timers, no events.
    for (let i = 0; i < 100; i++) tunnels.touched(a);
    expect(vi.getTimerCount()).toBe(0);

    const seen: { id: string; to: number; at: number }[] = [];
    const t0 = Date.now();
    tunnels.events.on("updated", (t: TunnelEntry) => seen.push({ id: t.tunnelId, to: t.bytesToDevice, at: Date.now() - t0 }));
    // A burst of chunks on a: one event at once, then one with the burst's last count when 2 s have passed.
    for (let i = 0; i < 50; i++) {
      a.bytesToDevice += 100;
      tunnels.touched(a);
      vi.advanceTimersByTime(30);
    }
    // b has its own throttle.
    tunnels.touched(b);
    vi.advanceTimersByTime(TUNNEL_UPDATE_MS);
    expect(seen).toEqual([
      { id: "t-a", to: 110, at: 0 },
      { id: "t-b", to: 10, at: 1500 },
      { id: "t-a", to: 5010, at: TUNNEL_UPDATE_MS },
    ]);
    // Quiet for longer than the throttle: the next change goes out at once.
    vi.advanceTimersByTime(TUNNEL_UPDATE_MS);
    a.bytesToDevice += 1;
    tunnels.touched(a);
    expect(seen.at(-1)).toEqual({ id: "t-a", to: 5011, at: 1500 + 2 * TUNNEL_UPDATE_MS });

    // A change pending when the tunnel closes is dropped with its timer: closed is the last word.
    tunnels.touched(a);
    expect(vi.getTimerCount()).toBe(1);
    tunnels.remove("t-a", farmError(Errors.TUNNEL_CLOSED, "closed"));
    expect(vi.getTimerCount()).toBe(0);
  });
});
