import { describe, expect, it } from "vitest";
import { ByteQueue } from "./byte-queue.js";

describe("byte queue", () => {
  it("makes the producer wait past the high-water mark until the consumer takes bytes, and keeps order", async () => {
    const q = new ByteQueue(10);
    await q.push(new Uint8Array(6));
    await q.push(new Uint8Array(6));
    let third = false;
    const pending = q.push(Uint8Array.of(7)).then(() => (third = true));
    await new Promise((r) => setImmediate(r));
    expect(third).toBe(false);
    const it = q[Symbol.asyncIterator]();
    expect((await it.next()).value?.length).toBe(6);
    await pending;
    expect(third).toBe(true);
    expect((await it.next()).value?.length).toBe(6);
    expect([...((await it.next()).value ?? [])]).toEqual([7]);
    q.close();
    expect((await it.next()).done).toBe(true);
  });

  it("releases a waiting producer when closed, and refuses bytes after", async () => {
    const q = new ByteQueue(1);
    await q.push(new Uint8Array(2));
    const waiting = q.push(new Uint8Array(1));
    q.close();
    expect(await waiting).toBe(false);
    expect(await q.push(new Uint8Array(1))).toBe(false);
  });
});
