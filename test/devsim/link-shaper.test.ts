import { describe, expect, it } from "vitest";
import { LinkShaper } from "./transport/link-shaper.js";

// The slow link's delays below a millisecond (a USB link's): dithered, not rounded up to Node's 1 ms timer.

/** Which of a link's write and a 1 ms timer set at the same moment comes first. */
async function firstOf(latencyMs: number, random: number): Promise<string[]> {
  const order: string[] = [];
  const link = new LinkShaper(() => ({ latencyMs }), () => order.push("packet"), () => random);
  await new Promise<void>((resolve) => {
    setTimeout(() => {
      order.push("1 ms timer");
      resolve();
    }, 1);
    link.write(Buffer.from("x"));
  });
  await new Promise((resolve) => setTimeout(resolve, 5));
  link.stop();
  return order;
}

describe("LinkShaper", () => {
  it("sends a 0.3 ms packet on the next turn of the loop 70% of the time and after a millisecond 30% of the time", async () => {
    expect(await firstOf(0.3, 0.5)).toEqual(["packet", "1 ms timer"]);
    expect(await firstOf(0.3, 0.2)).toEqual(["1 ms timer", "packet"]);
  });

  it("keeps the order of writes whatever their own delays, and sends them all", async () => {
    const got: string[] = [];
    let i = 0;
    const delays = [3, 0.2, 1.5, 0];
    const link = new LinkShaper(() => ({ latencyMs: delays[i++] ?? 0 }), (d) => got.push(d.toString()));
    for (const s of ["a", "b", "c", "d"]) link.write(Buffer.from(s));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(got).toEqual(["a", "b", "c", "d"]);
  });

  it("passes writes straight through with no delay and no bandwidth limit", () => {
    const got: string[] = [];
    new LinkShaper(() => ({}), (d) => got.push(d.toString())).write(Buffer.from("now"));
    expect(got).toEqual(["now"]);
  });
});
