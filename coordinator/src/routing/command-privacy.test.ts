import { createHash } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { canonicalJson } from "@farm/shared/canonical-json";
import { ActionRecordSchema, OwnershipSchema, type ActionRecord } from "@farm/shared/gen/farm/v1/device_service_pb";
import { FileSummaryKeyStore, SummaryKey } from "../auth/summary-key.js";
import type { Principal } from "../auth/token-store.js";
import { actionRecordFor, inputDetail, ownershipFor } from "./command-privacy.js";

let dir: string;
let key: SummaryKey;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "command-privacy-"));
  key = await SummaryKey.open(new FileSummaryKeyStore(dir));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const alice: Principal = { tokenName: "alice", kind: "user", role: "operator", admin: false };
const bob: Principal = { tokenName: "bob", kind: "user", role: "viewer", admin: false };
const root: Principal = { tokenName: "root", kind: "user", role: "admin", admin: true };

/** A journal record as the agent sends it: the request as canonical JSON and its hash. */
function record(kind: string, request: Record<string, unknown>): ActionRecord {
  const requestJson = canonicalJson(request);
  return create(ActionRecordSchema, { actionId: `${kind}-1`, kind, requestJson, requestSha256: createHash("sha256").update(requestJson).digest("hex"), requestedBy: "alice", state: "settled" });
}

describe("a journal record as a viewer sees it", () => {
  it("shows typed text, a key that may type, a shell command and a property value whole to the caller and admins", () => {
    for (const r of [record("input", { kind: "text", text: "1234" }), record("input", { kind: "key", key: "KEYCODE_1" }), record("shell", { command: "echo s3cr3t" }), record("setprop", { key: "debug.k", value: "s3cr3t" })]) {
      expect(actionRecordFor(alice, r, key)).toBe(r);
      expect(actionRecordFor(root, r, key)).toBe(r);
    }
  });

  it("shows anyone else the kind, the length and the keyed hash, and drops the request's plain sha256", () => {
    const text = actionRecordFor(bob, record("input", { kind: "text", text: "1234" }), key);
    expect(JSON.parse(text.requestJson)).toEqual({ kind: "text", length: 4, textHmac: key.summarize("1234"), redacted: true });
    expect(text.requestSha256).toBe("");
    const digit = actionRecordFor(bob, record("input", { kind: "key", key: "KEYCODE_1" }), key);
    expect(JSON.parse(digit.requestJson)).toEqual({ kind: "key", length: 9, keyHmac: key.summarize("KEYCODE_1"), redacted: true });
    expect(JSON.parse(actionRecordFor(bob, record("shell", { command: "echo s3cr3t" }), key).requestJson)).toEqual({ command: "echo", commandHmac: key.summarize("echo s3cr3t"), redacted: true });
    expect(JSON.parse(actionRecordFor(bob, record("setprop", { key: "debug.k", value: "s3cr3t" }), key).requestJson)).toEqual({ key: "debug.k", valueHmac: key.summarize("s3cr3t"), redacted: true });
    // In an ownership status too, unresolved and recent alike.
    const o = ownershipFor(bob, create(OwnershipSchema, { unresolved: [record("input", { kind: "text", text: "1234" })], recent: [record("input", { kind: "text", text: "1234" })] }), key);
    expect([...(o?.unresolved ?? []), ...(o?.recent ?? [])].map((r) => r.requestJson).join()).not.toContain("1234");
  });

  it("leaves taps, swipes and keys that type nothing as they are", () => {
    for (const r of [record("input", { kind: "tap", x: 1, y: 2 }), record("input", { kind: "swipe", x1: 1, y1: 2, x2: 3, y2: 4, durationMs: 0 }), record("input", { kind: "key", key: "KEYCODE_HOME" }), record("reboot", {})]) {
      expect(actionRecordFor(bob, r, key)).toBe(r);
    }
  });

  it("shows nothing of a request that is not the JSON its kind journals", () => {
    const odd = create(ActionRecordSchema, { kind: "input", requestJson: "not json 1234", requestedBy: "alice" });
    expect(JSON.parse(actionRecordFor(bob, odd, key).requestJson)).toEqual({ redacted: true });
    const shell = create(ActionRecordSchema, { kind: "shell", requestJson: "echo 1234", requestedBy: "alice" });
    expect(actionRecordFor(bob, shell, key).requestJson).not.toContain("1234");
  });
});

describe("an input's activity detail", () => {
  it("names what was sent", () => {
    expect(inputDetail({ kind: { case: "text", value: "hello" } })).toBe("text hello");
    expect(inputDetail({ kind: { case: "key", value: "KEYCODE_HOME" } })).toBe("key KEYCODE_HOME");
    expect(inputDetail({ kind: { case: "tap", value: { x: 10, y: 20 } } })).toBe("tap 10,20");
    expect(inputDetail({ kind: { case: "tap", value: { element: { by: { case: "text", value: "OK" } } } } })).toBe("tap text=\"OK\"");
    expect(inputDetail({ kind: { case: "swipe", value: { x1: 1, y1: 2, x2: 3, y2: 4 } } })).toBe("swipe 1,2 -> 3,4");
  });
});
