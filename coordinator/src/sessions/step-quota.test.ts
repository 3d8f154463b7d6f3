import { createHash } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import sharp from "sharp";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { fileAsBlobParts } from "@farm/shared/blob-parts";
import { createLogger } from "@farm/shared/log";
import { StepArtifactReportSchema, StepEvidenceSchema, type StepShot } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { DeviceService, SendInputRequestSchema, SendInputResponseSchema } from "@farm/shared/gen/farm/v1/device_service_pb";
import { sqliteDatabase, type FarmDatabase } from "../db/database.js";
import { FileByteStore } from "../bytes/file-byte-store.js";
import { BlobStore } from "../evidence/blob-store.js";
import { EvidenceQuota } from "../evidence/evidence-quota.js";
import { QuotaReservationStore } from "../evidence/quota-reservation-store.js";
import { SessionImageStore } from "./session-image-store.js";
import { SessionSteps } from "./session-steps.js";
import { Sessions } from "./sessions.js";
import { StepRecorder } from "./step-recorder.js";
import { createBlobIndexStore, createSessionStepStore, createSessionStore } from "../db/stores.js";

let opened: FarmDatabase | undefined;
let dir: string | undefined;
afterEach(async () => {
  await opened?.close();
  opened = undefined;
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

const AGENT = "agent-token";
const AGENT_OWNER = `agent:${AGENT}`;
const tap = create(SendInputRequestSchema, { target: { serial: "S-1" }, kind: { case: "tap", value: { x: 3, y: 4 } } });
const tapped = create(SendInputResponseSchema, { actionId: "act-1", dispatched: true, ambiguous: false });

/** A recorder whose session owner (alice) may keep `quotaBytes` in all. */
async function setup(quotaBytes: number) {
  dir = await mkdtemp(join(tmpdir(), "step-quota-"));
  const db = sqliteDatabase(":memory:");
  opened = db;
  const sessions = new Sessions(createSessionStore(db));
  const steps = new SessionSteps(createSessionStepStore(db));
  const blobs = new BlobStore(dir, { index: createBlobIndexStore(db), bytes: new FileByteStore(dir) });
  await blobs.init();
  const images = new SessionImageStore(dir);
  await images.init();
  const quotaStore = new QuotaReservationStore(db);
  const quota = new EvidenceQuota(quotaStore, quotaBytes, 4);
  const recorder = new StepRecorder({ sessions, steps, images, blobs, quota, log: createLogger({ level: "error" }) });
  const session = await sessions.start("alice", { leaseId: "l-1", physicalId: "pd-1", agentId: "a-1", serial: "S-1" }, { name: "", context: {}, ocr: false });
  const png = (color: string) => sharp({ create: { width: 8, height: 16, channels: 3, background: color } }).png().toBuffer();
  const upload = async (bytes: Buffer, owner: string) => {
    const file = join(dir as string, `in-${Math.random()}`);
    await writeFile(file, bytes);
    return { blobId: await blobs.put(fileAsBlobParts(file), owner), sha256: createHash("sha256").update(bytes).digest("hex"), size: bytes.length };
  };
  const shot = async (color: string): Promise<StepShot> => {
    const b = await upload(await png(color), AGENT_OWNER);
    return { $typeName: "farm.v1.StepShot", blobId: b.blobId, sha256: b.sha256, width: 8, height: 16, size: BigInt(b.size), captureTime: timestampFromMs(1) };
  };
  return { recorder, session, steps, blobs, quotaStore, png, upload, shot };
}

describe("session files against the owner's evidence quota", () => {
  it("records a step over quota with its result, its screenshot skipped QUOTA_EXCEEDED and the upload dropped", async () => {
    const probe = await sharp({ create: { width: 8, height: 16, channels: 3, background: "#ff0000" } }).png().toBuffer();
    // Room for the first screenshot, not the second.
    const { recorder, session, steps, blobs, quotaStore, shot } = await setup(probe.length + 10);
    const before = await shot("#ff0000");
    const after = await shot("#00ff00");
    const step = await recorder.open(session);
    await recorder.record(step, DeviceService.method.sendInput, tap, { response: tapped, evidence: create(StepEvidenceSchema, { before, after }) }, AGENT, "alice");
    const v = (await steps.get(session.sessionId, step.sequence))?.view;
    expect(v?.result).toMatchObject({ ok: true, actionId: "act-1", dispatched: true });
    expect(v?.before?.sha256).toBe(before.sha256);
    expect(v?.after).toMatchObject({ error: { code: "QUOTA_EXCEEDED" } });
    expect(v?.after?.error?.message).toContain("--evidence-quota");
    await expect(blobs.peek(after.blobId, AGENT_OWNER)).rejects.toThrow(/no blob/);
    // What was kept counts as stored; nothing stays reserved.
    expect(await quotaStore.usage("alice", Date.now())).toMatchObject({ sessionFileBytes: probe.length, reservedBytes: 0 });
  });

  it("says QUOTA_EXCEEDED again when the agent names a screen it was refused, not a protocol violation", async () => {
    const { recorder, session, steps, shot } = await setup(10);
    const before = await shot("#ff0000");
    const step = await recorder.open(session);
    // The screen did not change: the agent sends it once and names it again after the action.
    await recorder.record(step, DeviceService.method.sendInput, tap, { response: tapped, evidence: create(StepEvidenceSchema, { before, after: { ...before, blobId: "" } }) }, AGENT, "alice");
    const v = (await steps.get(session.sessionId, step.sequence))?.view;
    expect(v?.result).toMatchObject({ ok: true });
    expect(v?.before).toMatchObject({ error: { code: "QUOTA_EXCEEDED" } });
    expect(v?.after).toMatchObject({ error: { code: "QUOTA_EXCEEDED" } });
  });

  it("discloses an agent's artifact over quota as skipped QUOTA_EXCEEDED, and keeps the step", async () => {
    const { recorder, session, steps, upload } = await setup(10);
    const log = await upload(Buffer.alloc(500, 0x61), AGENT_OWNER);
    const artifact = create(StepArtifactReportSchema, { name: "device.log", kind: "deviceLog", provider: "adb", token: "deviceLog", when: "around", blobId: log.blobId, sha256: log.sha256, mimeType: "text/plain" });
    const step = await recorder.open(session);
    await recorder.record(step, DeviceService.method.sendInput, tap, { response: tapped, evidence: create(StepEvidenceSchema, { artifacts: [artifact] }) }, AGENT, "alice");
    const v = (await steps.get(session.sessionId, step.sequence))?.view;
    expect(v?.result).toMatchObject({ ok: true });
    expect(v?.artifacts).toHaveLength(1);
    expect(v?.artifacts[0]).toMatchObject({ name: "device.log", kind: "deviceLog" });
    expect(v?.artifacts[0]).not.toHaveProperty("sha256");
    expect(v?.artifacts[0]?.skippedReason).toMatch(/^QUOTA_EXCEEDED: /);
  });

  it("keeps a client's visual check over quota with its verdict, its images skipped QUOTA_EXCEEDED", async () => {
    const { recorder, session, upload, png, blobs } = await setup(10);
    const diff = await upload(await png("#123456"), "user:alice");
    const stored = await recorder.appendClientStep(
      session.sessionId,
      { tokenName: "alice", kind: "user" },
      {
        action: "assert-visual",
        description: "check",
        arguments: {},
        ok: false,
        errorCode: "",
        errorMessage: "3% differ",
        response: {},
        durationMs: 1,
        artifacts: [{ name: "diff.png", kind: "visual", provider: "runner", blobId: diff.blobId, mimeType: "image/png", when: "diff" }],
      },
    );
    expect(stored.view.result).toMatchObject({ ok: false, errorMessage: "3% differ" });
    expect(stored.view.artifacts[0]?.skippedReason).toMatch(/^QUOTA_EXCEEDED: /);
    await expect(blobs.peek(diff.blobId, "user:alice")).rejects.toThrow(/no blob/);
  });

  it("counts a client step's screenshot once when it is the check's actual.png", async () => {
    const { recorder, session, upload, png, blobs, quotaStore } = await setup(1024 * 1024);
    const screen = await png("#345678");
    const actual = await upload(screen, "user:alice");
    const before = await upload(screen, "user:alice");
    const stored = await recorder.appendClientStep(
      session.sessionId,
      { tokenName: "alice", kind: "user" },
      {
        action: "assert-visual",
        description: "check",
        arguments: {},
        ok: true,
        errorCode: "",
        errorMessage: "",
        response: {},
        durationMs: 1,
        artifacts: [{ name: "actual.png", kind: "visual", provider: "agent", blobId: actual.blobId, mimeType: "image/png", when: "actual" }],
        before: { blobId: before.blobId, sha256: "", errorCode: "", errorMessage: "" },
        after: { blobId: "", sha256: actual.sha256, errorCode: "", errorMessage: "" },
      },
    );
    expect(stored.view.before?.sha256).toBe(actual.sha256);
    expect(stored.view.after?.sha256).toBe(actual.sha256);
    expect(await quotaStore.usage("alice", Date.now())).toMatchObject({ sessionFileBytes: screen.length, reservedBytes: 0 });
    await expect(blobs.peek(before.blobId, "user:alice")).rejects.toThrow(/no blob/);
  });

  it("records a client step's screenshot over quota as QUOTA_EXCEEDED and keeps the step", async () => {
    const { recorder, session, upload, png, blobs } = await setup(10);
    const big = await upload(await png("#456789"), "user:alice");
    const over = await recorder.appendClientStep(
      session.sessionId,
      { tokenName: "alice", kind: "user" },
      { action: "wait", description: "wait", arguments: {}, ok: true, errorCode: "", errorMessage: "", response: {}, durationMs: 1, artifacts: [], before: { blobId: big.blobId, sha256: "", errorCode: "", errorMessage: "" } },
    );
    expect(over.view.before).toMatchObject({ error: { code: "QUOTA_EXCEEDED" } });
    expect(over.view.result.ok).toBe(true);
    await expect(blobs.peek(big.blobId, "user:alice")).rejects.toThrow(/no blob/);
  });
});
