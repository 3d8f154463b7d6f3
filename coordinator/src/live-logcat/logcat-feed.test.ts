import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { LogLineSchema } from "@farm/shared/gen/farm/v1/logcat_service_pb";
import { FEED_BACKLOG_LINES, LogcatFeed, LogcatViewer, VIEWER_BATCH_LINES, VIEWER_MAX_LINES, type LogBatch } from "./logcat-feed.js";

const lines = (from: number, n: number) => Array.from({ length: n }, (_, i) => create(LogLineSchema, { level: "I", tag: "t", message: String(from + i) }));

/** Everything a viewer has waiting, once the feed ends. */
async function drain(viewer: LogcatViewer, feed: LogcatFeed): Promise<LogBatch[]> {
  feed.end(null);
  const out: LogBatch[] = [];
  for await (const b of viewer) out.push(b);
  return out;
}

describe("logcat feed", () => {
  it("starts a viewer that joins late with the newest backlog lines, then every new line, in order", async () => {
    const feed = new LogcatFeed();
    feed.publish(lines(0, FEED_BACKLOG_LINES + 20));
    const v = new LogcatViewer();
    feed.join(v);
    feed.publish(lines(FEED_BACKLOG_LINES + 20, 3));
    const got = (await drain(v, feed)).flatMap((b) => b.lines.map((l) => Number(l.message)));
    expect(got[0]).toBe(20);
    expect(got.length).toBe(FEED_BACKLOG_LINES + 3);
    expect(got.every((n, i) => i === 0 || n === (got[i - 1] ?? 0) + 1)).toBe(true);
  });

  it("shares lines between viewers, and a viewer that falls behind loses its oldest lines (counted) instead of queueing without bound", async () => {
    const feed = new LogcatFeed();
    const slow = new LogcatViewer();
    const other = new LogcatViewer();
    feed.join(slow);
    feed.join(other);
    feed.publish(lines(0, VIEWER_MAX_LINES + 700));
    expect(slow.queuedLines).toBe(VIEWER_MAX_LINES);
    expect(slow.droppedTotal).toBe(700);
    expect(feed.stats()).toEqual({ viewers: 2, queuedLines: 2 * VIEWER_MAX_LINES, dropped: 1400 });
    const batches = await drain(slow, feed);
    expect(batches[0]?.dropped).toBe(700);
    expect(batches[0]?.lines[0]?.message).toBe("700");
    expect(batches.every((b) => b.lines.length <= VIEWER_BATCH_LINES)).toBe(true);
    expect(batches.slice(1).every((b) => b.dropped === 0)).toBe(true);
  });

  it("ends every viewer with the stream's error, and one joining an ended feed at once", async () => {
    const feed = new LogcatFeed();
    const v = new LogcatViewer();
    feed.join(v);
    const gone = new Error("agent gone");
    feed.end(gone);
    await expect(v[Symbol.asyncIterator]().next()).rejects.toBe(gone);
    const late = new LogcatViewer();
    feed.join(late);
    await expect(late[Symbol.asyncIterator]().next()).rejects.toBe(gone);
  });

  it("wakes a waiting viewer when lines arrive", async () => {
    const feed = new LogcatFeed();
    const v = new LogcatViewer();
    feed.join(v);
    const it = v[Symbol.asyncIterator]();
    const next = it.next();
    feed.publish(lines(0, 1));
    expect((await next).value).toMatchObject({ dropped: 0, lines: [{ message: "0" }] });
  });

  it("tells every viewer of lines missed upstream (a relay that fell behind on the agent's replica) with its next lines", async () => {
    const feed = new LogcatFeed();
    const v = new LogcatViewer();
    feed.join(v);
    feed.missed(7);
    feed.publish(lines(0, 2));
    const got = await drain(v, feed);
    expect(got).toEqual([{ lines: expect.any(Array) as unknown, dropped: 7 }]);
    expect(v.droppedTotal).toBe(7);
  });
});
