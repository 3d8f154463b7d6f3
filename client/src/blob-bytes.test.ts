import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { BlobPartSchema, type BlobPart } from "@farm/shared/gen/farm/v1/blob_pb";
import { Errors } from "@farm/shared/error-codes";
import { readBlobBytes } from "./blob-bytes.js";
import { FarmError } from "./farm-error.js";

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const header = (size: number, sha256: string) => create(BlobPartSchema, { kind: { case: "header", value: { size: BigInt(size), sha256, name: "x" } } });
const chunk = (b: Uint8Array) => create(BlobPartSchema, { kind: { case: "chunk", value: b } });

async function* parts(list: BlobPart[], onRead: () => void = () => undefined): AsyncGenerator<BlobPart> {
  for (const p of list) {
    onRead();
    yield p;
  }
}

async function code(p: Promise<unknown>): Promise<string> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(FarmError);
  return (err as FarmError).code;
}

describe("readBlobBytes", () => {
  const data = Buffer.from("a screenshot's bytes");

  it("returns the bytes that match their header", async () => {
    const got = await readBlobBytes(parts([header(data.length, sha(data)), chunk(data.subarray(0, 5)), chunk(data.subarray(5))]), 1024);
    expect(got.bytes.equals(data)).toBe(true);
    expect(got.sha256).toBe(sha(data));
  });

  it("refuses an announced size over the cap before reading any data", async () => {
    let reads = 0;
    expect(await code(readBlobBytes(parts([header(2048, sha(data)), chunk(data), chunk(data)], () => reads++), 1024))).toBe("RESOURCE_EXHAUSTED");
    expect(reads).toBe(1);
  });

  it("refuses damaged, short, long and headerless transfers", async () => {
    const other = Buffer.from(data).fill(0x41, 0, 1);
    expect(await code(readBlobBytes(parts([header(data.length, sha(data)), chunk(other)]), 1024))).toBe("EVIDENCE_TRANSFER_FAILED");
    expect(await code(readBlobBytes(parts([header(data.length, sha(data)), chunk(data.subarray(1))]), 1024))).toBe("EVIDENCE_TRANSFER_FAILED");
    expect(await code(readBlobBytes(parts([header(data.length - 1, sha(data)), chunk(data)]), 1024))).toBe("EVIDENCE_TRANSFER_FAILED");
    expect(await code(readBlobBytes(parts([chunk(data)]), 1024))).toBe("EVIDENCE_TRANSFER_FAILED");
    expect(await code(readBlobBytes(parts([]), 1024))).toBe("EVIDENCE_TRANSFER_FAILED");
    expect(await code(readBlobBytes(parts([header(data.length, sha(data)), header(data.length, sha(data))]), 1024))).toBe("EVIDENCE_TRANSFER_FAILED");
  });

  it("names its failures in the caller's terms (the CLI's visual checks: a screenshot's codes and noun)", async () => {
    const terms = { transferFailed: Errors.SCREENSHOT_TRANSFER_FAILED, tooLarge: (size: number) => new FarmError(Errors.SCREENSHOT_TOO_LARGE, `the blob is ${size} bytes`, undefined, null), noun: "screenshot" };
    const other = Buffer.from(data).fill(0x41, 0, 1);
    const damaged = await readBlobBytes(parts([header(data.length, sha(data)), chunk(other)]), 1024, terms).then(() => undefined, (e: unknown) => e as FarmError);
    expect(damaged).toMatchObject({ code: "SCREENSHOT_TRANSFER_FAILED" });
    expect(damaged?.message).toMatch(/^the screenshot arrived damaged \(/);
    const large = await readBlobBytes(parts([header(2048, sha(data))]), 1024, terms).then(() => undefined, (e: unknown) => e as FarmError);
    expect(large).toMatchObject({ code: "SCREENSHOT_TOO_LARGE", message: "the blob is 2048 bytes" });
    expect(large?.report()).toEqual({ ok: false, code: "SCREENSHOT_TOO_LARGE", message: "the blob is 2048 bytes" });
  });
});
