import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { ActionRecordSchema, GetOwnershipResponseSchema, OwnershipSchema, type ActionRecord } from "@farm/shared/gen/farm/v1/device_service_pb";
import { FileSummaryKeyStore, SummaryKey } from "../auth/summary-key.js";
import type { Principal } from "../auth/token-store.js";
import { ownershipFor } from "./command-privacy.js";
import { ownershipAsIs } from "./ownership-as-is.js";

let dir: string;
let key: SummaryKey;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "ownership-as-is-"));
  key = await SummaryKey.open(new FileSummaryKeyStore(dir));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const alice: Principal = { tokenName: "alice", kind: "user", role: "operator", admin: false };
const bob: Principal = { tokenName: "bob", kind: "user", role: "viewer", admin: false };
const root: Principal = { tokenName: "root", kind: "user", role: "admin", admin: true };

function record(kind: string, requestJson: string, requestedBy: string, n: number): ActionRecord {
  return create(ActionRecordSchema, {
    actionId: `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`,
    physicalId: "P1",
    serial: "emulator-5554",
    kind,
    requestJson,
    requestSha256: "a".repeat(64),
    requestedBy,
    state: "settled",
    dispatched: true,
    createTime: timestampFromMs(1_700_000_000_000 + n),
    receiptJson: "{\"exitCode\":0}",
  });
}

/** An agent's answer, encoded as the agent sends it. */
function answer(recent: ActionRecord[], unresolved: ActionRecord[] = []): Uint8Array {
  return toBinary(GetOwnershipResponseSchema, create(GetOwnershipResponseSchema, { ownership: create(OwnershipSchema, { physicalId: "P1", serial: "emulator-5554", agentId: "a1", recent, unresolved, aliases: ["emulator-5554"] }) }));
}

/** What the caller receives: the pass-through, encoded by the server and decoded by the client. */
function received(bytes: Uint8Array, viewer: Principal) {
  const m = ownershipAsIs(bytes, viewer);
  return m && fromBinary(GetOwnershipResponseSchema, toBinary(GetOwnershipResponseSchema, m));
}

describe("an ownership answer passed on as the agent encoded it", () => {
  const mine = [record("shell", "{\"command\":\"echo s3cr3t\"}", "alice", 1), record("setprop", "{\"key\":\"k\",\"value\":\"v\"}", "alice", 2), record("reboot", "{}", "bob", 3)];

  it("reaches an admin, and a caller whose own records they are, exactly as the view would give it", () => {
    for (const viewer of [root, alice]) {
      const bytes = answer(mine, [record("shell", "{\"command\":\"true\"}", "alice", 4)]);
      const viewed = create(GetOwnershipResponseSchema, { ownership: ownershipFor(viewer, fromBinary(GetOwnershipResponseSchema, bytes).ownership, key) });
      const got = received(bytes, viewer);
      expect(got).toBeDefined();
      expect(equals(GetOwnershipResponseSchema, got as typeof viewed, viewed)).toBe(true);
      expect(got?.ownership?.recent.map((r) => r.requestJson)).toEqual(["{\"command\":\"echo s3cr3t\"}", "{\"key\":\"k\",\"value\":\"v\"}", "{}"]);
    }
  });

  it("is declined when any record, recent or unresolved, would be redacted for the viewer", () => {
    expect(ownershipAsIs(answer(mine), bob)).toBeUndefined();
    expect(ownershipAsIs(answer([], [record("input", "{\"kind\":\"text\",\"text\":\"1234\"}", "alice", 5)]), bob)).toBeUndefined();
    // Another caller's records of kinds that carry no request text are shown to anyone as they are.
    expect(received(answer([record("reboot", "{}", "alice", 6)]), bob)?.ownership?.recent[0]?.requestJson).toBe("{}");
  });

  it("is declined for bytes of any other shape (the full decode then reports them)", () => {
    expect(ownershipAsIs(new Uint8Array([0x0a, 0x05, 1]), root)).toBeUndefined();
    // A second ownership field (protobuf would merge them) or an unknown field: left to the full decode.
    const one = answer(mine);
    expect(ownershipAsIs(new Uint8Array([...one, ...one]), root)).toBeUndefined();
    expect(ownershipAsIs(new Uint8Array([...one, 0x10, 0x01]), root)).toBeUndefined();
    expect(ownershipAsIs(new Uint8Array(), root)).toBeUndefined();
  });
});
