import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { ScreenEventSchema, type ScreenEvent } from "@farm/shared/gen/farm/v1/live_screen_service_pb";
import { ScreenFeed, ScreenViewer, VIEWER_MAX_BYTES } from "./screen-feed.js";

const format = (codec = "avc1.42E01E") => create(ScreenEventSchema, { kind: { case: "format", value: { codec, displayWidth: 720, displayHeight: 1600 } } });
const frame = (id: number, key: boolean, size = 10) => create(ScreenEventSchema, { kind: { case: "frame", value: { data: new Uint8Array(size).fill(id), key, capturedUnixMs: BigInt(id) } } });

/** What a viewer has waiting, as short labels: "F" a format, "K1" key frame 1, "d2" delta 2. */
async function drain(viewer: ScreenViewer, feed: ScreenFeed): Promise<string[]> {
  const out: string[] = [];
  feed.end(null);
  for await (const k of viewer) out.push(k.case === "format" ? "F" : `${k.value.key ? "K" : "d"}${k.value.data[0] ?? 0}`);
  return out;
}

const publish = (feed: ScreenFeed, ...events: ScreenEvent[]) => events.forEach((e) => feed.publish(e));

describe("screen feed", () => {
  it("starts a viewer that joins late at the last key frame, with the deltas since", async () => {
    const feed = new ScreenFeed();
    publish(feed, format(), frame(1, true), frame(2, false), frame(3, true), frame(4, false));
    const v = new ScreenViewer();
    feed.join(v);
    publish(feed, frame(5, false));
    expect(await drain(v, feed)).toEqual(["F", "K3", "d4", "d5"]);
  });

  it("sends a thumbnail viewer key frames only, from the same feed, the newest replacing one still waiting", async () => {
    const feed = new ScreenFeed();
    publish(feed, format(), frame(1, true), frame(2, false));
    const thumb = new ScreenViewer(true);
    const full = new ScreenViewer();
    feed.join(thumb);
    feed.join(full);
    publish(feed, frame(3, false), frame(4, true), frame(5, false), frame(6, true), frame(7, false));
    expect(await drain(full, feed)).toEqual(["F", "K1", "d2", "d3", "K4", "d5", "K6", "d7"]);
    // K1 was read by nobody before K4 came: only the newest key frame waits.
    expect(await drain(thumb, feed)).toEqual(["F", "K6"]);
  });

  it("gives a viewer that joined before any key frame nothing it cannot decode", async () => {
    const feed = new ScreenFeed();
    const v = new ScreenViewer();
    feed.join(v);
    publish(feed, format(), frame(1, false), frame(2, true), frame(3, false));
    expect(await drain(v, feed)).toEqual(["F", "K2", "d3"]);
  });

  it("sends a viewer that falls behind back to the last key frame instead of queueing without bound", async () => {
    const feed = new ScreenFeed();
    const slow = new ScreenViewer();
    publish(feed, format(), frame(1, true, 1000));
    feed.join(slow);
    const big = Math.ceil(VIEWER_MAX_BYTES / 10);
    // Nobody reads: the queue would pass its bound on the 11th big frame.
    for (let i = 2; i <= 12; i++) feed.publish(frame(i, i === 8, big));
    expect(slow.queuedBytes).toBeLessThanOrEqual(VIEWER_MAX_BYTES);
    expect(slow.resyncs).toBe(1);
    expect(await drain(slow, feed)).toEqual(["F", "K8", "d9", "d10", "d11", "d12"]);
  });

  it("restarts every viewer at a new format, and ends them with the stream's error", async () => {
    const feed = new ScreenFeed();
    const v = new ScreenViewer();
    feed.join(v);
    publish(feed, format(), frame(1, true), format("image/jpeg"), frame(2, true));
    const gone = new Error("agent gone");
    feed.end(gone);
    const seen: string[] = [];
    await expect(
      (async () => {
        for await (const k of v) seen.push(k.case);
      })(),
    ).rejects.toBe(gone);
    expect(seen).toEqual(["format", "frame"]);
    // A viewer joining an ended feed ends at once.
    const late = new ScreenViewer();
    feed.join(late);
    await expect(late[Symbol.asyncIterator]().next()).rejects.toBe(gone);
  });

  it("sends a viewer more than 1.5 s behind the phone back to the last key frame, however small its backlog", async () => {
    const feed = new ScreenFeed();
    const v = new ScreenViewer();
    const at = (id: number, key: boolean, ms: number) => create(ScreenEventSchema, { kind: { case: "frame", value: { data: new Uint8Array(4).fill(id), key, capturedUnixMs: BigInt(ms) } } });
    publish(feed, format(), at(1, true, 0));
    feed.join(v);
    publish(feed, at(2, false, 500), at(3, false, 1_000), at(4, true, 1_400), at(5, false, 1_600));
    expect(v.resyncs).toBe(1);
    expect(await drain(v, feed)).toEqual(["F", "K4", "d5"]);
  });
});
