/**
 * The library against a stand-in coordinator: a real HTTP/2 Connect server
 * in this process serving the lease, device, blob and session services the
 * way the coordinator's handlers answer (tokens, headers, blob parts,
 * farm error details). What is under test is the client side: one
 * connection for every call, the lease and session riding per call, errors
 * as FarmError with the table's code and field, input refused before it
 * is sent, a lease released at the end of an `await using` scope.
 */
import { createHash } from "node:crypto";
import type { ServerHttp2Session } from "node:http2";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { Errors, refusal } from "@farm/shared/errors";
import { exitCodeFor } from "@farm/shared/error-codes";
import { BlobPartSchema } from "@farm/shared/gen/farm/v1/blob_pb";
import { BlobService } from "@farm/shared/gen/farm/v1/blob_service_pb";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { LeaseSchema } from "@farm/shared/gen/farm/v1/lease_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { SessionSchema, SessionService, SessionStepSchema } from "@farm/shared/gen/farm/v1/session_service_pb";
import { FarmError, type FarmClient } from "./index.js";
import { farmFailure, startStandInCoordinator, type StandInCoordinator } from "./testing/stand-in-coordinator.js";

const PNG = Buffer.from("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4e10000000049454e44ae426082", "hex");
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

interface Seen {
  method: string;
  lease: string | null;
  session: string | null;
  auth: string | null;
}

let standIn: StandInCoordinator | undefined;
let sessions: readonly ServerHttp2Session[] = [];
let seen: Seen[] = [];
let farm: FarmClient | undefined;
/** What the stand-in's screenshot announces (a damaged transfer when it differs from the bytes). */
let announcedSha = sha(PNG);

function note(method: string, h: Headers): void {
  seen.push({ method, lease: h.get("x-farm-lease"), session: h.get("x-farm-session"), auth: h.get("authorization") });
}

function routes(router: ConnectRouter): void {
  router.service(LeaseService, {
    acquireLease: (req, ctx) => {
      note("AcquireLease", ctx.requestHeader);
      if (req.selector?.model === "NoSuchPhone") throw refusal(Errors.NO_DEVICE_MATCHES, "no phone in the farm is model NoSuchPhone (models: Pixel 8)", "selector.model");
      return { token: "farml_granted", lease: create(LeaseSchema, { leaseId: "lease-1", physicalId: "pd-1", agentId: "agent-1", agentName: "lab1", serial: "emulator-5554", ttlMs: 60_000 }) };
    },
    releaseLease: (req, ctx) => {
      note(`ReleaseLease ${req.token}`, ctx.requestHeader);
      return {};
    },
  });
  router.service(DeviceService, {
    runShell: (req, ctx) => {
      note(`RunShell ${req.command}`, ctx.requestHeader);
      return { actionId: "act-shell", exitCode: 3, stdout: new TextEncoder().encode("out\n"), stderr: new TextEncoder().encode("err\n"), dispatched: true, ambiguous: false };
    },
    sendInput: (req, ctx) => {
      note(`SendInput ${req.kind.case}`, ctx.requestHeader);
      if (req.kind.case === "tap" && req.kind.value.element?.by.case === "text" && req.kind.value.element.by.value === "Missing") {
        throw refusal(Errors.ELEMENT_NOT_FOUND, "no element has the text \"Missing\"", "tap.element.text");
      }
      return { actionId: "act-input", dispatched: true, ambiguous: false };
    },
    takeScreenshot: (_req, ctx) => {
      note("TakeScreenshot", ctx.requestHeader);
      return { blobId: "blob-1", width: 1, height: 1, size: BigInt(PNG.length), sha256: announcedSha };
    },
  });
  router.service(BlobService, {
    async *downloadBlob(req, ctx) {
      note(`DownloadBlob ${req.blobId}`, ctx.requestHeader);
      yield { part: create(BlobPartSchema, { kind: { case: "header", value: { size: BigInt(PNG.length), sha256: sha(PNG), name: "screen.png" } } }) };
      yield { part: create(BlobPartSchema, { kind: { case: "chunk", value: PNG.subarray(0, 20) } }) };
      yield { part: create(BlobPartSchema, { kind: { case: "chunk", value: PNG.subarray(20) } }) };
    },
  });
  router.service(SessionService, {
    startSession: (req, ctx) => {
      note(`StartSession ${req.name}`, ctx.requestHeader);
      return { session: create(SessionSchema, { sessionId: "sess-1", name: req.name, serial: req.target?.serial ?? "" }) };
    },
    listSessionSteps: (req, ctx) => {
      note(`ListSessionSteps ${req.sessionId}`, ctx.requestHeader);
      return { steps: [create(SessionStepSchema, { sequence: 1, action: "tap" })], nextPageToken: "" };
    },
  });
}

beforeEach(async () => {
  seen = [];
  announcedSha = sha(PNG);
  // Nothing from this machine's environment or config file: the options alone.
  standIn = await startStandInCoordinator(routes);
  farm = standIn.farm;
  sessions = standIn.sessions;
});

afterEach(async () => {
  await standIn?.close();
  standIn = undefined;
});

const failure = farmFailure;

describe("@farm/client over one connection", () => {
  it("makes every call, unary and streaming, on one HTTP/2 connection, lease and session per call", async () => {
    const c = farm as FarmClient;
    {
      await using lease = await c.acquire({ model: "Pixel 8" });
      expect(lease).toMatchObject({ leaseId: "lease-1", serial: "emulator-5554", physicalId: "pd-1", token: "farml_granted" });
      const sh = await lease.device.shell("echo hi");
      expect(sh).toEqual({ actionId: "act-shell", dispatched: true, ambiguous: false, exitCode: 3, stdout: "out\n", stderr: "err\n" });
      const shot = await lease.device.screenshot();
      expect(shot.png.equals(PNG)).toBe(true);
      expect(shot).toMatchObject({ width: 1, height: 1, sha256: sha(PNG) });
      const session = await lease.startSession({ name: "checkout" });
      await session.device.tap({ text: "Next" });
      expect((await session.steps()).map((s) => s.action)).toEqual(["tap"]);
    }
    expect(sessions).toHaveLength(1);
    const by = (m: string) => seen.find((s) => s.method === m);
    expect(by("AcquireLease")).toMatchObject({ lease: null, session: null, auth: "Bearer farmu_lib" });
    expect(by("RunShell echo hi")).toMatchObject({ lease: "farml_granted", session: null });
    expect(by("TakeScreenshot")).toMatchObject({ lease: "farml_granted" });
    expect(by("DownloadBlob blob-1")).toMatchObject({ lease: "farml_granted" });
    expect(by("StartSession checkout")).toMatchObject({ lease: "farml_granted", session: null });
    expect(by("SendInput tap")).toMatchObject({ lease: "farml_granted", session: "sess-1" });
    // The scope's end released it, once.
    expect(seen.filter((s) => s.method.startsWith("ReleaseLease")).map((s) => s.method)).toEqual(["ReleaseLease farml_granted"]);
  });

  it("releases the lease when the scope throws, and the body's error is what the caller sees", async () => {
    const c = farm as FarmClient;
    const thrown = new Error("the test failed");
    const run = async () => {
      await using lease = await c.acquire({});
      await lease.device.shell("true");
      throw thrown;
    };
    await expect(run()).rejects.toBe(thrown);
    expect(seen.map((s) => s.method)).toEqual(["AcquireLease", "RunShell true", "ReleaseLease farml_granted"]);
  });

  it("turns the coordinator's refusals into FarmError: its code, field, exit code and outcome", async () => {
    const c = farm as FarmClient;
    const none = await failure(c.acquire({ model: "NoSuchPhone" }));
    expect(none).toMatchObject({ code: "NO_DEVICE_MATCHES", field: "selector.model", outcome: { dispatched: false, ambiguous: false } });
    expect(none.exitCode).toBe(exitCodeFor("NO_DEVICE_MATCHES"));
    expect(none.message).toContain("NoSuchPhone");
    const missing = await failure(c.device("emulator-5554", { lease: "farml_x" }).tap({ text: "Missing" }));
    expect(missing).toMatchObject({ code: "ELEMENT_NOT_FOUND", field: "tap.element.text" });
    expect(missing.report()).toMatchObject({ ok: false, code: "ELEMENT_NOT_FOUND", dispatched: false });
  });

  it("refuses bad input before anything is sent, naming the field", async () => {
    const c = farm as FarmClient;
    const d = c.device("emulator-5554", { lease: "farml_x" });
    expect(await failure(d.tap(-1, 5))).toMatchObject({ code: "INVALID_ARGUMENT", field: "x" });
    expect(await failure(d.tap(1.5, 5))).toMatchObject({ code: "INVALID_ARGUMENT", field: "x" });
    expect(await failure(d.tap({ id: "a", text: "b" } as unknown as { id: string }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "text" });
    expect(await failure(d.tap({ desc: "" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "desc" });
    expect(await failure(d.key("HOME; reboot"))).toMatchObject({ code: "INVALID_ARGUMENT", field: "key" });
    expect(await failure(d.shell(" "))).toMatchObject({ code: "INVALID_ARGUMENT", field: "command" });
    expect(await failure(d.captureEvidence({ label: "x".repeat(3000) }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "label" });
    expect(await failure(d.captureEvidence({ outputDir: "relative/dir" }))).toMatchObject({ code: "INVALID_ARGUMENT" });
    expect(await failure(c.acquire({ waitMs: -1 }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "waitMs" });
    expect(await failure(c.acquire({ apiLevel: { min: 1.5 } }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "apiLevel.min" });
    expect(() => c.device("")).toThrow(FarmError);
    expect(seen).toEqual([]);
  });

  it("refuses a screenshot whose bytes are not the ones the agent reported", async () => {
    announcedSha = "0".repeat(64);
    const err = await failure((farm as FarmClient).device("emulator-5554", { lease: "farml_x" }).screenshot());
    expect(err.code).toBe("EVIDENCE_TRANSFER_FAILED");
  });

  it("ends every call once closed, with a FarmError", async () => {
    const c = farm as FarmClient;
    c.close();
    expect(c.closed).toBe(true);
    expect(await failure(c.device("emulator-5554").shell("true"))).toMatchObject({ code: "CALL_CANCELLED" });
  });
});
