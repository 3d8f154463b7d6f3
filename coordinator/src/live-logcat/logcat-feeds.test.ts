import { afterEach, describe, expect, it, vi } from "vitest";
import { createLogger } from "@farm/shared/log";
import { toErrorReport } from "@farm/shared/errors";
import { LogcatViewer } from "./logcat-feed.js";
import { LOGCAT_START_TIMEOUT_MS, LogcatFeeds } from "./logcat-feeds.js";

const log = createLogger({ level: "error", write: () => {} });

afterEach(() => vi.useRealTimers());

describe("logcat feeds", () => {
  it("starts one stream per phone however many join, lets the agent claim it once, and ends it a while after the last viewer leaves", async () => {
    vi.useFakeTimers();
    const feeds = new LogcatFeeds(log);
    const started: string[] = [];
    const start = async (id: string) => void started.push(id);
    const a = await feeds.feedFor("pd-1", start);
    const b = await feeds.feedFor("pd-1", start);
    expect(b).toBe(a);
    expect(started).toEqual([a.streamId]);
    expect(feeds.claim(a.streamId)).toBe(a);
    expect(feeds.claim(a.streamId)).toBeUndefined();
    const v1 = new LogcatViewer();
    const v2 = new LogcatViewer();
    a.feed.join(v1);
    a.feed.join(v2);
    expect(feeds.stats()).toMatchObject({ phones: 1, viewers: 2 });
    feeds.left("pd-1", a, v1);
    feeds.left("pd-1", a, v2);
    // A reloaded page within the linger finds the same stream.
    expect(await feeds.feedFor("pd-1", start)).toBe(a);
    const v3 = new LogcatViewer();
    a.feed.join(v3);
    feeds.left("pd-1", a, v3);
    vi.advanceTimersByTime(5_000);
    expect(a.stop.signal.aborted).toBe(true);
    expect(feeds.stats().phones).toBe(0);
    // The next viewer starts a new stream.
    expect((await feeds.feedFor("pd-1", start)).streamId).not.toBe(a.streamId);
    feeds.endAll();
  });

  it("ends a stream the agent never joins, with COMMAND_TIMEOUT for its viewers", async () => {
    vi.useFakeTimers();
    const feeds = new LogcatFeeds(log);
    const r = await feeds.feedFor("pd-2", async () => {});
    const v = new LogcatViewer();
    r.feed.join(v);
    vi.advanceTimersByTime(LOGCAT_START_TIMEOUT_MS + 1);
    const err = await v[Symbol.asyncIterator]().next().then(() => undefined, (e: unknown) => e);
    expect(toErrorReport(err).code).toBe("COMMAND_TIMEOUT");
    expect(feeds.claim(r.streamId)).toBeUndefined();
  });

  it("forgets a stream whose start failed, so the next viewer tries again", async () => {
    const feeds = new LogcatFeeds(log);
    await expect(feeds.feedFor("pd-3", () => Promise.reject(new Error("agent said no")))).rejects.toThrow("agent said no");
    expect(feeds.stats().phones).toBe(0);
    const r = await feeds.feedFor("pd-3", async () => {});
    expect(feeds.claim(r.streamId)).toBe(r);
    feeds.endAll();
  });
});
