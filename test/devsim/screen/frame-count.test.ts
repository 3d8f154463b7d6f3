import { describe, expect, it } from "vitest";
import { FrameCount } from "./frame-count.js";

describe("FrameCount", () => {
  it("resolves a wait once the count reaches it, and at once for a count already reached", async () => {
    const frames = new FrameCount();
    const order: string[] = [];
    const three = frames.reached(3).then(() => order.push("3"));
    const one = frames.reached(1).then(() => order.push("1"));
    frames.add();
    await one;
    expect(order).toEqual(["1"]);
    frames.add();
    await Promise.resolve();
    expect(order).toEqual(["1"]);
    frames.add();
    await three;
    expect(order).toEqual(["1", "3"]);
    await frames.reached(2);
    expect(frames.value).toBe(3);
  });
});
