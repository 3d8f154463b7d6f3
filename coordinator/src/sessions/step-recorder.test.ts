import { mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHash } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import sharp from "sharp";
import { create, toJsonString } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { fileAsBlobParts } from "@farm/shared/blob-parts";
import { createLogger } from "@farm/shared/log";
import { farmError, actionError, Errors } from "@farm/shared/errors";
import { StepArtifactReportSchema, StepEvidenceSchema, type StepShot } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { DeviceService, RunShellRequestSchema, RunShellResponseSchema, SendInputRequestSchema, SendInputResponseSchema } from "@farm/shared/gen/farm/v1/device_service_pb";
import { SessionStepSchema } from "@farm/shared/gen/farm/v1/session_service_pb";
import { sqliteDatabase, type FarmDatabase } from "../db/database.js";
import { FileByteStore } from "../bytes/file-byte-store.js";
import { BlobStore } from "../evidence/blob-store.js";
import type { Principal } from "../auth/token-store.js";
import { SessionImageStore } from "./session-image-store.js";
import { SessionSteps } from "./session-steps.js";
import { Sessions } from "./sessions.js";
import { stepFor, stepMessage } from "./step-message.js";
import { StepRecorder } from "./step-recorder.js";
import { FileSummaryKeyStore, SummaryKey } from "../auth/summary-key.js";
import { CapturePlans } from "./capture-plans.js";
import { secretLeaks } from "@farm/shared/testing/secret-leaks";
import { createBlobIndexStore, createSessionStepStore, createSessionStore } from "../db/stores.js";

let opened: FarmDatabase | undefined;
let dir: string | undefined;
afterEach(async () => {
  await opened?.close();
  opened = undefined;
  if (dir) await rm(dir, { recursive: true, force: true });
  dir = undefined;
});

const lease = { leaseId: "l-1", physicalId: "pd-1", agentId: "a-1", serial: "S-1" };
const AGENT = "agent-token";
/** How the blob store names the agent's uploads. */
const AGENT_OWNER = `agent:${AGENT}`;

async function setup(ocr = false, secrets: { name: string; value: string }[] = [], policyJson = "") {
  dir = await mkdtemp(join(tmpdir(), "step-recorder-"));
  const db = sqliteDatabase(":memory:");
  opened = db;
  const sessions = new Sessions(createSessionStore(db));
  const steps = new SessionSteps(createSessionStepStore(db));
  const blobs = new BlobStore(dir, { index: createBlobIndexStore(db), bytes: new FileByteStore(dir) });
  await blobs.init();
  const images = new SessionImageStore(dir);
  await images.init();
  const queued: [string, number, string][] = [];
  const recorder = new StepRecorder({ sessions, steps, images, blobs, log: createLogger({ level: "error" }), ocr: { queue: (id, seq, sha) => void queued.push([id, seq, sha]) }, plans: new CapturePlans(undefined, { labels: ["pin"] }) });
  const session = await sessions.start("alice", lease, { name: "", context: {}, ocr, secrets, policyJson });
  /** A PNG uploaded as a blob by `owner`, described as the agent would. */
  const shot = async (color: string, owner = AGENT_OWNER, claim: Partial<{ width: number; height: number; sha256: string }> = {}): Promise<StepShot> => {
    const png = await sharp({ create: { width: 8, height: 16, channels: 3, background: color } }).png().toBuffer();
    const file = join(dir as string, `in-${color.slice(1)}-${Math.random()}.png`);
    await writeFile(file, png);
    const blobId = await blobs.put(fileAsBlobParts(file), owner);
    const sha256 = createHash("sha256").update(png).digest("hex");
    return { $typeName: "farm.v1.StepShot", blobId, sha256: claim.sha256 ?? sha256, width: claim.width ?? 8, height: claim.height ?? 16, size: BigInt(png.length), captureTime: timestampFromMs(1) };
  };
  return { sessions, steps, images, blobs, recorder, session, shot, queued };
}

const tap = create(SendInputRequestSchema, { target: { serial: "S-1" }, kind: { case: "tap", value: { x: 3, y: 4 } } });
const tapped = create(SendInputResponseSchema, { actionId: "act-1", dispatched: true, ambiguous: false });
const alice: Principal = { tokenName: "alice", kind: "user", role: "operator", admin: false };
const bob: Principal = { tokenName: "bob", kind: "user", role: "viewer", admin: false };

describe("StepRecorder", () => {
  it("checks that a call may be a step: running, the caller's, this phone", async () => {
    const { recorder, session, sessions } = await setup();
    expect((await recorder.session(session.sessionId, alice, "pd-1")).sessionId).toBe(session.sessionId);
    await expect(recorder.session(session.sessionId, bob, "pd-1")).rejects.toThrow(/belongs to alice/);
    await expect(recorder.session(session.sessionId, alice, "pd-2")).rejects.toThrow(/is on phone S-1/);
    await sessions.end(session.sessionId, "passed", alice);
    await expect(recorder.session(session.sessionId, alice, "pd-1")).rejects.toThrow(/has ended/);
  });

  it("stores a step with distinct before and after screenshots, content-addressed, each stored once", async () => {
    const { recorder, session, steps, images, shot } = await setup();
    const before = await shot("#ff0000");
    const after = await shot("#00ff00");
    const step = await recorder.open(session);
    await recorder.record(step, DeviceService.method.sendInput, tap, { response: tapped, evidence: create(StepEvidenceSchema, { before, after, startTime: timestampFromMs(5), durationMs: 7 }) }, AGENT, "alice");
    const stored = await steps.get(session.sessionId, step.sequence);
    expect(stored?.view).toMatchObject({ recordVersion: 2, action: "tap", description: "tap (3, 4)", startedAt: 5, durationMs: 7, result: { ok: true, actionId: "act-1", dispatched: true } });
    expect(stored?.view.before?.sha256).toBe(before.sha256);
    expect(stored?.view.after?.sha256).toBe(after.sha256);
    expect(before.sha256).not.toBe(after.sha256);
    const file = join(dir as string, images.key(before.sha256));
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    // The same screen again, uploaded again: still one file.
    const again = await shot("#ff0000");
    const next = await recorder.open(session);
    expect(next.known).toEqual(expect.arrayContaining([before.sha256, after.sha256]));
    await recorder.record(next, DeviceService.method.sendInput, tap, { response: tapped, evidence: create(StepEvidenceSchema, { before: again, after: { ...again, blobId: "" } }) }, AGENT, "alice");
    expect((await steps.get(session.sessionId, next.sequence))?.view.after?.sha256).toBe(before.sha256);
    const files = (await readdir(images.root, { recursive: true })).filter((f) => f.endsWith(".png"));
    expect(files).toHaveLength(2);
  });

  it("keeps a failed step with the screenshot it got and the failure, and counts it as failed", async () => {
    const { recorder, session, sessions, shot, steps } = await setup();
    const before = await shot("#0000ff");
    const step = await recorder.open(session);
    const lost: StepShot = {
      $typeName: "farm.v1.StepShot",
      blobId: "",
      sha256: "",
      width: 0,
      height: 0,
      size: 0n,
      error: { $typeName: "farm.v1.CommandError", message: "device S-1 went away", status: 14, detail: { $typeName: "farm.v1.ErrorDetail", code: "DEVICE_OFFLINE", field: "", ambiguous: false, actionId: "", agentId: "" } },
    };
    const error = actionError(Errors.DEVICE_OFFLINE, "the phone vanished mid-action", { dispatched: null, ambiguous: true, actionId: "act-9" });
    await recorder.record(step, DeviceService.method.sendInput, tap, { error, evidence: create(StepEvidenceSchema, { before, after: lost }) }, AGENT, "alice");
    const v = (await steps.get(session.sessionId, step.sequence))?.view;
    expect(v?.before?.sha256).toBe(before.sha256);
    expect(v?.after).toMatchObject({ error: { code: "DEVICE_OFFLINE", message: "device S-1 went away" } });
    expect(v?.result).toMatchObject({ ok: false, errorCode: "DEVICE_OFFLINE", dispatched: null, ambiguous: true, actionId: "act-9" });
    expect(await sessions.get(session.sessionId)).toMatchObject({ stepCount: 1, failedStepCount: 1 });
  });

  it("keeps the attempts the agent gave up on before its result", async () => {
    const { recorder, session, steps } = await setup();
    const step = await recorder.open(session);
    const attempts = [{
      $typeName: "farm.v1.StepAttemptReport" as const,
      startTime: timestampFromMs(10),
      durationMs: 30,
      error: {
        $typeName: "farm.v1.CommandError" as const,
        message: "socket hang up",
        status: 14,
        detail: { $typeName: "farm.v1.ErrorDetail" as const, code: "bridge_transport_failed", field: "", ambiguous: false, actionId: "", agentId: "" },
      },
    }];
    await recorder.record(step, DeviceService.method.sendInput, tap, { response: tapped, evidence: create(StepEvidenceSchema, { attempts }) }, AGENT, "alice");
    expect((await steps.get(session.sessionId, step.sequence))?.view.attempts).toEqual([{ startedAt: 10, durationMs: 30, errorCode: "bridge_transport_failed", errorMessage: "socket hang up" }]);
  });

  it("records a call that never reached the agent (no captures) as a failed step", async () => {
    const { recorder, session, steps } = await setup();
    const step = await recorder.open(session);
    await recorder.record(step, DeviceService.method.sendInput, tap, { error: farmError(Errors.LEASE_REQUIRED, "no lease") }, "", "alice");
    expect((await steps.get(session.sessionId, step.sequence))?.view).toMatchObject({ before: null, after: null, result: { ok: false, errorCode: "LEASE_REQUIRED" } });
  });

  it("does not trust the agent's screenshots: another token's blob, a wrong sha256, a non-PNG, a wrong size, an unknown reference", async () => {
    const { recorder, session, shot, steps, blobs } = await setup();
    const foreign = await shot("#111111", "user:alice");
    const lying = await shot("#222222", AGENT_OWNER, { sha256: "d".repeat(64) });
    const wrongSize = await shot("#333333", AGENT_OWNER, { width: 9 });
    const junkFile = join(dir as string, "junk");
    await writeFile(junkFile, "not a png at all, not at all");
    const junkId = await blobs.put(fileAsBlobParts(junkFile), AGENT_OWNER);
    const junk: StepShot = { $typeName: "farm.v1.StepShot", blobId: junkId, sha256: createHash("sha256").update("not a png at all, not at all").digest("hex"), width: 1, height: 1, size: 28n };
    const unknown: StepShot = { $typeName: "farm.v1.StepShot", blobId: "", sha256: "e".repeat(64), width: 1, height: 1, size: 1n };
    const cases: [StepShot, RegExp][] = [
      [foreign, /no blob/],
      [lying, /the agent said/],
      [wrongSize, /is 8x16, the agent said 9x16/],
      [junk, /not a PNG/],
      [unknown, /does not have/],
    ];
    for (const [s, why] of cases) {
      const step = await recorder.open(session);
      await recorder.record(step, DeviceService.method.sendInput, tap, { response: tapped, evidence: create(StepEvidenceSchema, { before: s }) }, AGENT, "alice");
      const v = (await steps.get(session.sessionId, step.sequence))?.view;
      expect(v?.before?.sha256, String(why)).toBeUndefined();
      expect(v?.before?.error?.message).toMatch(why);
      // The action's own result is what it was.
      expect(v?.result.ok).toBe(true);
    }
    expect(await steps.knownImages(session.sessionId)).toEqual([]);
  });

  it("queues OCR of the before screenshot in a session with OCR on, and says why when there is none", async () => {
    const { recorder, session, shot, steps, queued } = await setup(true);
    const before = await shot("#444444");
    const one = await recorder.open(session);
    await recorder.record(one, DeviceService.method.sendInput, tap, { response: tapped, evidence: create(StepEvidenceSchema, { before }) }, AGENT, "alice");
    expect(queued).toEqual([[session.sessionId, one.sequence, before.sha256]]);
    expect((await steps.get(session.sessionId, one.sequence))?.ocr).toMatchObject({ status: "pending" });
    const two = await recorder.open(session);
    await recorder.record(two, DeviceService.method.sendInput, tap, { response: tapped }, AGENT, "alice");
    expect((await steps.get(session.sessionId, two.sequence))?.ocr).toMatchObject({ status: "skipped", error: "no before screenshot" });
  });

  it("attaches a still capture as a version 1 record whose screenshot is the after image", async () => {
    const { recorder, session, steps } = await setup();
    const step = await recorder.open(session);
    await recorder.recordStill(step, "0b6f3c1e-2a4d-4c8e-9f10-5d2e7a9b1c33", "screenshot.png", "complete", "alice");
    const v = (await steps.get(session.sessionId, step.sequence))?.view;
    expect(v).toMatchObject({ recordVersion: 1, action: "evidence", before: null, after: { evidenceId: "0b6f3c1e-2a4d-4c8e-9f10-5d2e7a9b1c33", path: "screenshot.png" } });
  });

  it("keeps nothing of a client step refused for one of its files: no step, no stored file, the blobs handed back", async () => {
    const { recorder, session, steps, images, blobs, shot } = await setup();
    const good = await shot("#555555", "user:alice");
    const foreign = await shot("#666666", "user:bob");
    const art = (blobId: string, name: string) => ({ name, kind: "visual", provider: "runner", blobId, mimeType: "image/png", when: "actual" });
    const req = { action: "assert-visual", description: "check", arguments: {}, ok: true, errorCode: "", errorMessage: "", response: {}, durationMs: 1 };
    await expect(recorder.appendClientStep(session.sessionId, { tokenName: "alice", kind: "user" }, { ...req, artifacts: [art(good.blobId, "a.png"), art(foreign.blobId, "b.png")] })).rejects.toThrow(/no blob/);
    expect((await steps.listPage(session.sessionId, { pageSize: 0, pageToken: "" })).items).toEqual([]);
    expect(await steps.knownImages(session.sessionId)).toEqual([]);
    expect((await readdir(images.root, { recursive: true })).filter((f) => f.endsWith(".png"))).toEqual([]);
    // The first file was not consumed: the caller may still use (or lose with its TTL) its blob.
    await expect(blobs.take(good.blobId, "user:alice")).resolves.toMatchObject({ sha256: good.sha256 });
  });

  it("refuses a client's text file over the limit by its size, before reading it", async () => {
    const { recorder, session, blobs } = await setup();
    const big = join(dir as string, "big.json");
    await writeFile(big, Buffer.alloc(17 * 1024 * 1024, 0x20));
    const blobId = await blobs.put(fileAsBlobParts(big), "user:alice");
    const req = { action: "wait", description: "wait", arguments: {}, ok: false, errorCode: "COMMAND_TIMEOUT", errorMessage: "", response: {}, durationMs: 1 };
    const err = await recorder
      .appendClientStep(session.sessionId, { tokenName: "alice", kind: "user" }, { ...req, artifacts: [{ name: "wait-timeout.json", kind: "diagnosis", provider: "runner", blobId, mimeType: "application/json", when: "" }] })
      .catch((e: unknown) => e);
    expect(String(err)).toMatch(/at most 16 MiB/);
  });

  it("masks a step's secrets before any cut: descriptions, cut arguments and output excerpts keep no prefix of one", async () => {
    const secret = "Zq7\"Kx/9Wv\\pL2mN8rT";
    const { recorder, session, steps } = await setup(false, [{ name: "PW", value: secret }]);
    const json = JSON.stringify({ pw: secret });
    const commands = [
      // The description shows 200 characters of the command: the secret starts at 192.
      `echo ${"x".repeat(187)}${secret} && am start --es cfg '${json}'`,
      // Arguments keep 4096 characters of a string: the secret starts at 4086.
      `echo ${"y".repeat(4081)}${secret}`,
      `am broadcast --es cfg '${json}'`,
    ];
    for (const command of commands) {
      const step = await recorder.open(session);
      const req = create(RunShellRequestSchema, { target: { serial: "S-1" }, command });
      // The output excerpt keeps 2000 characters: the secret starts at 1995.
      const res = create(RunShellResponseSchema, { actionId: "a", exitCode: 0, stdout: Buffer.from(`${"z".repeat(1995)}${secret}\n`), stderr: Buffer.from(json), dispatched: true });
      await recorder.record(step, DeviceService.method.runShell, req, { response: res }, AGENT, "alice");
      const stored = (await steps.get(session.sessionId, step.sequence)) as NonNullable<Awaited<ReturnType<typeof steps.get>>>;
      expect(secretLeaks(stored, secret), command.slice(0, 40)).toEqual([]);
      expect(secretLeaks(stepMessage(stored), secret)).toEqual([]);
    }
    // Taps by text and typed text, as the description quotes them (JSON-escaped).
    const typed = create(SendInputRequestSchema, { target: { serial: "S-1" }, kind: { case: "text", value: `${"t".repeat(115)}${secret}` } });
    const byText = create(SendInputRequestSchema, { target: { serial: "S-1" }, kind: { case: "tap", value: { element: { by: { case: "text", value: json } } } } });
    for (const req of [typed, byText]) {
      const step = await recorder.open(session);
      await recorder.record(step, DeviceService.method.sendInput, req, { response: tapped }, AGENT, "alice");
      expect(secretLeaks(await steps.get(session.sessionId, step.sequence), secret)).toEqual([]);
    }
  });

  it("masks a wait's diagnosis trees by the policy's and the site's labels and fields, and the session's secrets, before keeping it", async () => {
    const SECRET = "Zq7Kx9WvpL-wait";
    const policyJson = JSON.stringify({ redact: { labels: ["password"], fields: ["contentDesc"] } });
    const { recorder, session, blobs, images } = await setup(false, [{ name: "PW", value: SECRET }], policyJson);
    const el = (resourceId: string, text: string, contentDesc = "") => ({ type: "android.widget.EditText", text, resourceId, contentDesc, bounds: { left: 0, top: 0, right: 1, bottom: 1 }, children: [] as unknown[] });
    const nodes = [el("com.app:id/password", "hunter2-typed"), el("com.app:id/pin", "4711"), el("", `hello ${SECRET}`, "account 12345")];
    const diagnosis = { kind: "farm-wait-diagnosis", selector: { text: "Sign in" }, elements: nodes, matching: [], tree: [{ ...el("", ""), children: nodes }] };
    const file = join(dir as string, "wait-timeout.json");
    await writeFile(file, JSON.stringify(diagnosis, null, 2) + "\n");
    const blobId = await blobs.put(fileAsBlobParts(file), "user:alice");
    const req = { action: "wait", description: "wait for text \"Sign in\"", arguments: {}, ok: false, errorCode: "COMMAND_TIMEOUT", errorMessage: "", response: {}, durationMs: 1 };
    const step = await recorder.appendClientStep(
      session.sessionId,
      { tokenName: "alice", kind: "user" },
      { ...req, artifacts: [{ name: "wait-timeout.json", kind: "diagnosis", provider: "runner", blobId, mimeType: "application/json", when: "" }] },
    );
    const kept = step.view.artifacts[0];
    const chunks: Buffer[] = [];
    for await (const c of images.read(kept?.sha256 ?? "", "application/json")) chunks.push(Buffer.from(c));
    const stored = Buffer.concat(chunks).toString("utf8");
    expect(secretLeaks(stored, SECRET)).toEqual([]);
    expect(stored).not.toContain("hunter2-typed");
    expect(stored).not.toContain("4711");
    expect(stored).not.toContain("account 12345");
    const back = JSON.parse(stored) as typeof diagnosis;
    for (const list of [back.elements, back.tree[0]?.children as typeof nodes]) {
      expect(list.map((e) => e.text)).toEqual(["[redacted]", "[redacted]", "hello [redacted]"]);
      expect(list.map((e) => e.resourceId)).toEqual(["com.app:id/password", "com.app:id/pin", ""]);
      expect(list[2]?.contentDesc).toBe("[redacted]");
    }
    expect(back.selector).toEqual({ text: "Sign in" });
  });

  it("shows a shell step's command and output only to its caller and admins", async () => {
    const { recorder, session, steps } = await setup();
    const key = await SummaryKey.open(new FileSummaryKeyStore(dir as string));
    const step = await recorder.open(session);
    const req = create(RunShellRequestSchema, { target: { serial: "S-1" }, command: "echo $CI_TOKEN=s3cr3t" });
    const res = create(RunShellResponseSchema, { actionId: "a", exitCode: 0, stdout: Buffer.from("s3cr3t\n"), stderr: new Uint8Array(), dispatched: true });
    await recorder.record(step, DeviceService.method.runShell, req, { response: res }, AGENT, "alice");
    const msg = stepMessage((await steps.get(session.sessionId, step.sequence)) as NonNullable<Awaited<ReturnType<typeof steps.get>>>);
    const own = stepFor(alice, msg, key);
    expect(own.description).toContain("s3cr3t");
    expect(own.result?.outputExcerpt).toBe("s3cr3t\n");
    const other = stepFor(bob, msg, key);
    expect(JSON.stringify(other.arguments)).not.toContain("s3cr3t");
    expect(other.description).not.toContain("s3cr3t");
    expect(other.description).toBe(`shell echo [hmac:${key.summarize("echo $CI_TOKEN=s3cr3t")}]`);
    expect(other.result?.outputExcerpt).toBe("");
    expect(other.result?.response).toBeUndefined();
    expect(stepFor({ ...bob, admin: true, role: "admin" }, msg, key).description).toContain("s3cr3t");
  });

  it("shows a step's typed text only to its caller and admins; others see its length and keyed hash", async () => {
    const { recorder, session, steps } = await setup();
    const key = await SummaryKey.open(new FileSummaryKeyStore(dir as string));
    const typed = async (kind: { case: "text"; value: string } | { case: "key"; value: string }) => {
      const step = await recorder.open(session);
      const req = create(SendInputRequestSchema, { target: { serial: "S-1" }, kind });
      await recorder.record(step, DeviceService.method.sendInput, req, { response: create(SendInputResponseSchema, { actionId: "a", dispatched: true }) }, AGENT, "alice");
      return stepMessage((await steps.get(session.sessionId, step.sequence)) as NonNullable<Awaited<ReturnType<typeof steps.get>>>);
    };
    const text = await typed({ case: "text", value: "MyP4ssw0rd" });
    expect(stepFor(alice, text, key).description).toContain("MyP4ssw0rd");
    expect(stepFor({ ...bob, admin: true, role: "admin" }, text, key).description).toContain("MyP4ssw0rd");
    const other = stepFor(bob, text, key);
    expect(toJsonString(SessionStepSchema, other)).not.toContain("MyP4ssw0rd");
    expect(other.description).toBe(`type [10 chars, hmac:${key.summarize("MyP4ssw0rd")}]`);
    expect(other.arguments).toEqual({ text: `[10 chars, hmac:${key.summarize("MyP4ssw0rd")}]`, redacted: true });
    // A digit typed as a key is one character of a PIN; a key that types nothing is shown.
    expect(stepFor(bob, await typed({ case: "key", value: "KEYCODE_7" }), key).description).toBe(`key [9 chars, hmac:${key.summarize("KEYCODE_7")}]`);
    expect(stepFor(bob, await typed({ case: "key", value: "KEYCODE_HOME" }), key).description).toBe("key KEYCODE_HOME");
  });

  describe("client steps", () => {
    const ALICE = { tokenName: "alice", kind: "user" as const };
    const check = { action: "assert-visual", description: "visual check against home.png", arguments: {}, response: {}, artifacts: [], durationMs: 5 };
    const uploaded = (s: StepShot) => ({ blobId: s.blobId, sha256: "", errorCode: "", errorMessage: "", capturedAt: 100 });

    it("keeps a client step's before and after screenshots like a routed step's; a failed visual check carries VISUAL_MISMATCH", async () => {
      const { recorder, session, steps, shot, queued } = await setup(true);
      const before = await shot("#123456", "user:alice");
      const after = await shot("#654321", "user:alice");
      const failed = await recorder.appendClientStep(session.sessionId, ALICE, { ...check, ok: false, errorCode: "VISUAL_MISMATCH", errorMessage: "the screen differs", before: uploaded(before), after: uploaded(after) });
      expect(failed.view.result).toMatchObject({ ok: false, errorCode: "VISUAL_MISMATCH" });
      expect(failed.view.before).toMatchObject({ sha256: before.sha256, width: 8, height: 16, capturedAt: 100 });
      expect(failed.view.after).toMatchObject({ sha256: after.sha256, width: 8, height: 16 });
      // Its before screen is OCR'd as a routed step's is.
      expect(queued).toEqual([[session.sessionId, failed.sequence, before.sha256]]);
      // The same screen after as before is named by its sha256, not uploaded again.
      const same = await shot("#abcdef", "user:alice");
      const passed = await recorder.appendClientStep(session.sessionId, ALICE, { ...check, ok: true, errorCode: "", errorMessage: "", before: uploaded(same), after: { blobId: "", sha256: same.sha256, errorCode: "", errorMessage: "" } });
      expect(passed.view.before?.sha256).toBe(same.sha256);
      expect(passed.view.after?.sha256).toBe(same.sha256);
      expect(await steps.knownImages(session.sessionId)).toEqual(expect.arrayContaining([before.sha256, after.sha256, same.sha256]));
      // The wire message carries them as a routed step's.
      const msg = stepMessage((await steps.get(session.sessionId, failed.sequence)) as NonNullable<Awaited<ReturnType<typeof steps.get>>>);
      expect(msg.before?.sha256).toBe(before.sha256);
      expect(msg.after?.sha256).toBe(after.sha256);
    });

    it("records a screenshot the client could not take, or did not send, as missing with why", async () => {
      const { recorder, session, shot, blobs } = await setup();
      const before = await shot("#0a0a0a", "user:alice");
      const lost = { blobId: "", sha256: "", errorCode: "DEVICE_OFFLINE", errorMessage: "device S-1 went away", capturedAt: 7 };
      const one = await recorder.appendClientStep(session.sessionId, ALICE, { ...check, action: "wait", ok: false, errorCode: "COMMAND_TIMEOUT", errorMessage: "", before: uploaded(before), after: lost });
      expect(one.view.after).toEqual({ capturedAt: 7, error: { code: "DEVICE_OFFLINE", message: "device S-1 went away" } });
      // A client older than the coordinator sends none: said so, never silently empty.
      const old = await recorder.appendClientStep(session.sessionId, ALICE, { ...check, ok: true, errorCode: "", errorMessage: "" });
      expect(old.view.before?.error).toMatchObject({ code: "NOT_IMPLEMENTED", message: expect.stringMatching(/sent no screenshot/) });
      expect(old.view.after?.error?.code).toBe("NOT_IMPLEMENTED");
      // Bytes that are not a PNG are not kept as the screen.
      const junkFile = join(dir as string, "junk-shot");
      await writeFile(junkFile, "not a png, only words");
      const junk = await blobs.put(fileAsBlobParts(junkFile), "user:alice");
      const notPng = await recorder.appendClientStep(session.sessionId, ALICE, { ...check, ok: true, errorCode: "", errorMessage: "", before: { blobId: junk, sha256: "", errorCode: "", errorMessage: "" } });
      expect(notPng.view.before?.error?.code).toBe("SCREENSHOT_NOT_PNG");
      expect(notPng.view.before?.sha256).toBeUndefined();
    });

    it("refuses a client screenshot that is not one thing, names an unknown code, or a screen the session does not keep, before numbering the step", async () => {
      const { recorder, session, steps, shot } = await setup();
      const s = await shot("#0b0b0b", "user:alice");
      const bad: [object, RegExp][] = [
        [{ before: { ...uploaded(s), errorCode: "DEVICE_OFFLINE" } }, /exactly one of/],
        [{ before: { blobId: "", sha256: "", errorCode: "", errorMessage: "" } }, /exactly one of/],
        [{ after: { blobId: "", sha256: "", errorCode: "NO_SUCH_CODE", errorMessage: "" } }, /not a code of the error table/],
        [{ after: { blobId: "", sha256: "f".repeat(64), errorCode: "", errorMessage: "" } }, /keeps no screenshot/],
        [{ before: { blobId: "", sha256: "F00", errorCode: "", errorMessage: "" } }, /sha256 in lowercase hex/],
      ];
      for (const [shots, why] of bad) await expect(recorder.appendClientStep(session.sessionId, ALICE, { ...check, ok: true, errorCode: "", errorMessage: "", ...shots }), String(why)).rejects.toThrow(why);
      expect((await steps.listPage(session.sessionId, { pageSize: 0, pageToken: "" })).items).toEqual([]);
      // Another user's upload is not the caller's screenshot.
      const foreign = await shot("#0c0c0c", "user:bob");
      await expect(recorder.appendClientStep(session.sessionId, ALICE, { ...check, ok: true, errorCode: "", errorMessage: "", before: uploaded(foreign) })).rejects.toThrow(/no blob/);
    });

    it("discloses what the policy asks of a client step that it cannot have as skipped, with the rule that asked", async () => {
      const policyJson = JSON.stringify({ capture: ["elements.after", "screenshot.before"], capturePolicy: [{ on: { result: "error" }, capture: ["video", "deviceLog"] }, { on: { event: "screenChanged" }, capture: ["elements.before"] }] });
      const { recorder, session, shot } = await setup(false, [], policyJson);
      const a = await shot("#0d0d0d", "user:alice");
      const passed = await recorder.appendClientStep(session.sessionId, ALICE, { ...check, ok: true, errorCode: "", errorMessage: "", before: uploaded(a), after: { blobId: "", sha256: a.sha256, errorCode: "", errorMessage: "" } });
      expect(passed.view.artifacts).toEqual([
        { name: "elements.after.json", kind: "elements", provider: "coordinator", when: "after", reason: "default", skippedReason: expect.stringMatching(/runs in the CLI.*no UI element tree/) },
      ]);
      const b = await shot("#0e0e0e", "user:alice");
      const c = await shot("#0f0f0f", "user:alice");
      const failed = await recorder.appendClientStep(session.sessionId, ALICE, { ...check, ok: false, errorCode: "VISUAL_MISMATCH", errorMessage: "", before: uploaded(b), after: uploaded(c) });
      expect(failed.view.artifacts.map((x) => [x.name, x.reason, Boolean(x.skippedReason), x.sha256])).toEqual([
        ["elements.before.json", "rule 2", true, undefined],
        ["elements.after.json", "default", true, undefined],
        ["video.mp4", "rule 1", true, undefined],
        ["device.log", "rule 1", true, undefined],
      ]);
    });
  });

  it("marks the captures a post-hoc rule kept as speculative, and not those a definite source asked for", async () => {
    const policyJson = JSON.stringify({ capture: ["elements.after"], capturePolicy: [{ on: { action: "tap" }, capture: ["deviceLog"] }, { on: { result: "error" }, capture: ["video", "elements.before"] }] });
    const { recorder, session, steps, blobs } = await setup(false, [], policyJson);
    const upload = async (name: string, body: string) => {
      const file = join(dir as string, `${name}-${Math.random()}`);
      await writeFile(file, body);
      return { blobId: await blobs.put(fileAsBlobParts(file), AGENT_OWNER), sha256: createHash("sha256").update(body).digest("hex") };
    };
    const reportsFor = async (tokens: readonly string[]) => {
      const out = [];
      for (const token of tokens) {
        const [kind = "", when = ""] = token.split(".");
        const mimeType = kind === "elements" ? "application/json" : "text/plain";
        out.push(create(StepArtifactReportSchema, { name: `${token}-file`, kind, provider: "agent", token, when, mimeType, ...(await upload(token, `{"token":"${token}"}`)) }));
      }
      return out;
    };
    const failing = await recorder.open(session);
    const plan = recorder.planFor(failing, DeviceService.method.sendInput, tap, []);
    expect(plan.captures.sort()).toEqual(["deviceLog.around", "elements.after", "elements.before", "video.around"]);
    await recorder.record(failing, DeviceService.method.sendInput, tap, { error: farmError(Errors.DEVICE_OFFLINE, "gone"), evidence: create(StepEvidenceSchema, { artifacts: await reportsFor(plan.captures) }) }, AGENT, "alice");
    const byToken = new Map((await steps.get(session.sessionId, failing.sequence))?.view.artifacts.map((a) => [a.name.replace(/-file$/, ""), a]));
    expect(byToken.get("elements.after")).toMatchObject({ reason: "default" });
    expect(byToken.get("elements.after")).not.toHaveProperty("speculative");
    expect(byToken.get("deviceLog.around")).toMatchObject({ reason: "rule 1" });
    expect(byToken.get("deviceLog.around")).not.toHaveProperty("speculative");
    expect(byToken.get("video.around")).toMatchObject({ reason: "rule 2", speculative: true });
    expect(byToken.get("elements.before")).toMatchObject({ reason: "rule 2", speculative: true });
    const msg = stepMessage((await steps.get(session.sessionId, failing.sequence)) as NonNullable<Awaited<ReturnType<typeof steps.get>>>);
    expect(msg.artifacts.filter((a) => a.speculative).map((a) => a.name).sort()).toEqual(["elements.before-file", "video.around-file"]);
    // A step that passed keeps none of them: nothing speculative is left.
    const passing = await recorder.open(session);
    const again = recorder.planFor(passing, DeviceService.method.sendInput, tap, []);
    await recorder.record(passing, DeviceService.method.sendInput, tap, { response: tapped, evidence: create(StepEvidenceSchema, { artifacts: await reportsFor(again.captures) }) }, AGENT, "alice");
    const kept = (await steps.get(session.sessionId, passing.sequence))?.view.artifacts ?? [];
    expect(kept.map((a) => a.name).sort()).toEqual(["deviceLog.around-file", "elements.after-file"]);
    expect(kept.some((a) => a.speculative)).toBe(false);
  });
});
