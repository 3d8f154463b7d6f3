import { mkdtemp, rm } from "node:fs/promises";
import { connect, constants as h2constants } from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { ConnectError, createClient } from "@connectrpc/connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { toErrorReport } from "@farm/shared/errors";
import { createLogger } from "@farm/shared/log";
import { ErrorDetailSchema } from "@farm/shared/gen/farm/v1/error_pb";
import { AcquireLeaseRequestSchema, AcquireLeaseResponseSchema, LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { ListDevicesRequestSchema, ListDevicesResponseSchema, RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { RunShellRequestSchema } from "@farm/shared/gen/farm/v1/device_service_pb";
import { CreateTokenRequestSchema, TokenKind } from "@farm/shared/gen/farm/v1/token_service_pb";
import { AgentService, AttachRequestSchema } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { PROTOCOL_VERSION } from "@farm/shared/version";
import { startCoordinator, type RunningCoordinator } from "../coordinator.js";
import { grpcEnvelope } from "@farm/shared/testing/grpc-envelope";
import { seededRandom } from "@farm/shared/testing/seeded-random";

/**
 * The fast path answers as Connect's handler does: every case is sent to
 * two coordinators, one with the fast path and one without, and their
 * answers (status, headers, trailers with the error's details, body) must
 * be the same; real gRPC clients (@grpc/grpc-js, connect-node) get their
 * results and refusals from it.
 */

interface Side {
  name: string;
  coordinator: RunningCoordinator;
  /** operator, viewer, another operator (holds the phone's lease). */
  operator: string;
  viewer: string;
  holder: string;
  lines: { level: string; msg: string }[];
}

let dir: string;
const sides: Side[] = [];
const stop = new AbortController();
const SERIAL = "bench-0-0";

async function startSide(name: string, fast: boolean): Promise<Side> {
  const lines: Side["lines"] = [];
  const log = createLogger({ level: "warn", write: (l) => void lines.push(JSON.parse(l) as Side["lines"][number]) });
  const coordinator = await startCoordinator({ listen: { host: "127.0.0.1", port: 0 }, dataDir: join(dir, name), dashboardDir: null, log, unaryFastPath: fast });
  const token = async (n: string, kind: "user" | "agent", role?: "viewer" | "operator") => (await coordinator.tokens.create(n, kind, role)).secret;
  const side: Side = { name, coordinator, operator: await token("ci", "user", "operator"), viewer: await token("watcher", "user", "viewer"), holder: await token("other", "user", "operator"), lines };
  attachAgent(coordinator.url, await token("agent-0", "agent"));
  // Wait for the phone to be listed, then lease it to "other".
  const registry = createClient(RegistryService, createGrpcTransport({ baseUrl: coordinator.url, interceptors: [bearer(side.operator)] }));
  for (;;) {
    if ((await registry.listDevices({})).devices.some((d) => d.serial === SERIAL)) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  await createClient(LeaseService, createGrpcTransport({ baseUrl: coordinator.url, interceptors: [bearer(side.holder)] })).acquireLease({ selector: { serial: SERIAL }, ttlMs: 600_000 });
  return side;
}

const bearer = (token: string) => (next: Parameters<import("@connectrpc/connect").Interceptor>[0]) => (req: Parameters<Parameters<import("@connectrpc/connect").Interceptor>[0]>[0]) => {
  req.header.set("authorization", `Bearer ${token}`);
  return next(req);
};

/** An agent with one phone, attached until the tests end (no adb behind it: calls that reach it are never answered). */
function attachAgent(url: string, token: string): void {
  const requests = (async function* () {
    yield create(AttachRequestSchema, { kind: { case: "hello", value: { agentId: "agent-0", name: "agent-0", hostname: "h", protocolVersion: PROTOCOL_VERSION, agentVersion: "t", heartbeatIntervalMs: 60_000 } } });
    const properties = { model: "Pixel 7", manufacturer: "Google", apiLevel: 34, androidVersion: "14", abi: "arm64-v8a", serialno: "SN0", bootId: "00000000-0000-4000-8000-000000000000", physicalId: "pd-0", identityStatus: "ok" };
    yield create(AttachRequestSchema, { kind: { case: "inventory", value: { devices: [{ serial: SERIAL, state: "device", properties }] } } });
    await new Promise((r) => stop.signal.addEventListener("abort", r, { once: true }));
  })();
  const it = createClient(AgentService, createGrpcTransport({ baseUrl: url, interceptors: [bearer(token)] })).attach(requests, { signal: stop.signal })[Symbol.asyncIterator]();
  void (async () => {
    try {
      for (;;) if ((await it.next()).done) break;
    } catch {
      // The stream ends with the tests.
    }
  })();
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-fast-unary-"));
  sides.push(await startSide("connect", false), await startSide("fast", true));
}, 60_000);

afterAll(async () => {
  stop.abort();
  for (const s of sides) await s.coordinator.close();
  await rm(dir, { recursive: true, force: true });
});

const envelope = grpcEnvelope;

interface RawAnswer {
  headers: Record<string, unknown>;
  trailers: Record<string, unknown>;
  body: string;
}

/** One raw HTTP/2 call, as any gRPC client frames it; `open` keeps the request body open (a client still sending). */
async function raw(side: Side, path: string, body: Buffer, headers: Record<string, string> = {}, open = false): Promise<RawAnswer> {
  const session = connect(side.coordinator.url);
  try {
    const req = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers });
    let answerHeaders: Record<string, unknown> = {};
    let trailers: Record<string, unknown> = {};
    const chunks: Buffer[] = [];
    req.on("response", (h) => (answerHeaders = { ...h }));
    req.on("trailers", (t) => (trailers = { ...t }));
    req.on("data", (d: Buffer) => chunks.push(d));
    req.on("error", () => {});
    if (open) req.write(body);
    else req.end(body);
    await new Promise((resolve) => req.on("close", resolve));
    delete answerHeaders["date"];
    return { headers: answerHeaders, trailers, body: Buffer.concat(chunks).toString("base64") };
  } finally {
    session.close();
  }
}

/** The farm error a raw answer carries (its grpc-status-details-bin), as clients read it. */
function report(a: RawAnswer) {
  const h = new Headers();
  for (const [k, v] of Object.entries({ ...a.headers, ...a.trailers })) if (!k.startsWith(":")) h.set(k, String(v));
  return toErrorReport(findTrailerError(h) ?? new ConnectError("no error"));
}

const auth = (token: string) => ({ authorization: `Bearer ${token}` });
const msg = <D extends DescMessage>(schema: D, init: Parameters<typeof create<D>>[1]) => envelope(0, toBinary(schema, create(schema, init)));

const isoTime = /\d{4}-\d\d-\d\dT\d\d(?:%3A|:)\d\d(?:%3A|:)\d\d\.\d{3}Z/g;
/** An answer's trailers with times (a lease's end, in the message and its details) made alike. */
const timelessTrailers = (t: Record<string, unknown>) => {
  const out = { ...t };
  if (typeof out["grpc-message"] === "string") out["grpc-message"] = out["grpc-message"].replace(isoTime, "<time>");
  if (typeof out["grpc-status-details-bin"] === "string") out["grpc-status-details-bin"] = Buffer.from(out["grpc-status-details-bin"], "base64").toString("latin1").replace(isoTime, "<time>");
  return out;
};

/** The same call to both coordinators: the answers must be the same (but for times: a server-timing duration, a lease's end, a body with the phone's last-seen time). */
async function same(name: string, call: (s: Side) => Promise<RawAnswer>, compareBody = true): Promise<RawAnswer> {
  const [a, b] = [await call(sides[0]!), await call(sides[1]!)];
  const timeless = (r: RawAnswer) => ({ ...r, headers: { ...r.headers, "server-timing": String(r.headers["server-timing"] ?? "").replace(/;dur=[\d.]+/g, "") }, trailers: timelessTrailers(r.trailers), body: compareBody ? r.body : "" });
  expect({ name, ...timeless(b) }).toEqual({ name, ...timeless(a) });
  return b;
}

async function fastCalls(s: Side): Promise<number> {
  const r = await fetch(`${s.coordinator.url}/metrics`);
  const m = /^farm_unary_fast_path_calls_total (\d+)$/m.exec(await r.text());
  return Number(m?.[1] ?? NaN);
}

describe("the unary fast path", () => {
  it("answers every outcome with Connect's headers, trailers, details and body", async () => {
    const before = await fastCalls(sides[1]!);
    const list = msg(ListDevicesRequestSchema, {});
    const ok = await same("health check", (s) => raw(s, "/grpc.health.v1.Health/Check", envelope(0, new Uint8Array(0))));
    expect(ok.trailers["grpc-status"]).toBe("0");
    const listed = await same("an authenticated read, gzip accepted", (s) => raw(s, "/farm.v1.RegistryService/ListDevices", list, { ...auth(s.operator), "grpc-accept-encoding": "gzip" }), false);
    expect(listed.headers["grpc-encoding"]).toBe("gzip");
    expect(fromBinary(ListDevicesResponseSchema, Buffer.from(listed.body, "base64").subarray(5)).devices.map((d) => d.serial)).toEqual([SERIAL]);
    expect(report(await same("no token", (s) => raw(s, "/farm.v1.RegistryService/ListDevices", list)))).toMatchObject({ code: "UNAUTHENTICATED" });
    expect(report(await same("a bad token", (s) => raw(s, "/farm.v1.RegistryService/ListDevices", list, auth("farm_nope"))))).toMatchObject({ code: "UNAUTHENTICATED" });
    expect(report(await same("a viewer asks for an admin's method", (s) => raw(s, "/farm.v1.TokenService/CreateToken", msg(CreateTokenRequestSchema, { name: "x", kind: TokenKind.USER }), auth(s.viewer))))).toMatchObject({
      code: "PERMISSION_DENIED",
    });
    const shell = msg(RunShellRequestSchema, { target: { serial: SERIAL }, command: "true" });
    expect(report(await same("a phone someone else's lease holds", (s) => raw(s, "/farm.v1.DeviceService/RunShell", shell, auth(s.operator))))).toMatchObject({ code: expect.stringMatching(/^LEASE_/) });
    expect(report(await same("bytes that are no message", (s) => raw(s, "/farm.v1.RegistryService/ListDevices", envelope(0, new Uint8Array([0xff, 0xff, 0xff])), auth(s.operator))))).toMatchObject({ code: "INVALID_ARGUMENT" });
    expect(report(await same("a compressed envelope, no encoding", (s) => raw(s, "/farm.v1.RegistryService/ListDevices", envelope(1, new Uint8Array([1])), auth(s.operator))))).toMatchObject({ code: "INVALID_ARGUMENT" });
    expect((await same("two messages", (s) => raw(s, "/farm.v1.RegistryService/ListDevices", Buffer.concat([list, list]), auth(s.operator)))).trailers["grpc-status"]).toBe("12");
    expect((await same("no message", (s) => raw(s, "/farm.v1.RegistryService/ListDevices", Buffer.alloc(0), auth(s.operator)))).trailers["grpc-status"]).toBe("12");
    expect((await same("a cut envelope", (s) => raw(s, "/farm.v1.RegistryService/ListDevices", list.subarray(0, 3), auth(s.operator)))).trailers["grpc-status"]).toBe("3");
    expect((await same("a bad grpc-timeout", (s) => raw(s, "/farm.v1.RegistryService/ListDevices", list, { ...auth(s.operator), "grpc-timeout": "soon" }))).trailers["grpc-status"]).toBe("3");
    // Refused from the envelope's header while the client is still sending: the answer comes before the body's end.
    const tooLarge = await same("a message over the cap, still sending", (s) => raw(s, "/farm.v1.RegistryService/ListDevices", envelope(0, new Uint8Array(10), 1024 * 1024), auth(s.operator), true));
    expect(tooLarge.trailers["grpc-status"]).toBe("8");
    // A caller's own errors are no failures of the coordinator.
    for (const s of sides) expect(s.lines.filter((l) => l.level === "error")).toEqual([]);
    // Served by the fast path (the metric counts them; the gate refused the two without valid credentials); the other coordinator by Connect's handler.
    expect(await fastCalls(sides[1]!)).toBe(before + 11);
    expect(await fastCalls(sides[0]!)).toBe(0);
  });

  it("gives @grpc/grpc-js its results and farm's refusals with their details", async () => {
    for (const s of sides) {
      const client = new grpc.Client(new URL(s.coordinator.url).host, grpc.credentials.createInsecure());
      const ser = <D extends DescMessage>(schema: D) => (m: MessageShape<D>) => Buffer.from(toBinary(schema, m));
      const de = <D extends DescMessage>(schema: D) => (b: Buffer) => fromBinary(schema, b);
      const list = (token?: string) =>
        new Promise<MessageShape<typeof ListDevicesResponseSchema>>((resolve, reject) => {
          const md = new grpc.Metadata();
          if (token) md.set("authorization", `Bearer ${token}`);
          client.makeUnaryRequest("/farm.v1.RegistryService/ListDevices", ser(ListDevicesRequestSchema), de(ListDevicesResponseSchema), create(ListDevicesRequestSchema), md, (err, res) => (err ? reject(err) : resolve(res!)));
        });
      expect((await list(s.operator)).devices.map((d) => d.serial)).toEqual([SERIAL]);
      const refused = (await list().catch((e: unknown) => e)) as grpc.ServiceError;
      expect(refused.code).toBe(grpc.status.UNAUTHENTICATED);
      const details = refused.metadata.get("grpc-status-details-bin")[0] as Buffer;
      const h = new Headers({ "grpc-status": String(refused.code), "grpc-status-details-bin": details.toString("base64") });
      expect(findTrailerError(h)?.findDetails(ErrorDetailSchema)[0]?.code).toBe("UNAUTHENTICATED");
      client.close();
    }
  });

  it("gives connect-node's gRPC transport its results and farm's refusals with their details", async () => {
    for (const s of sides) {
      const registry = (token: string) => createClient(RegistryService, createGrpcTransport({ baseUrl: s.coordinator.url, interceptors: [bearer(token)] }));
      expect((await registry(s.operator).listDevices({})).devices.map((d) => d.serial)).toEqual([SERIAL]);
      const err = ConnectError.from(await registry("farm_nope").listDevices({}).catch((e: unknown) => e));
      expect(err.findDetails(ErrorDetailSchema)[0]?.code).toBe("UNAUTHENTICATED");
    }
  });

  it("ends the call's work at its deadline (grpc-timeout), as Connect does", async () => {
    for (const s of sides) {
      // The phone is leased to "other": this caller waits in the queue until the deadline ends the call.
      const emptied = queueEmptied(s);
      const answer = await raw(s, "/farm.v1.LeaseService/AcquireLease", msg(AcquireLeaseRequestSchema, { selector: { serial: SERIAL }, waitMs: 600_000, ttlMs: 60_000 }), { ...auth(s.operator), "grpc-timeout": "1000m" });
      expect({ side: s.name, status: answer.trailers["grpc-status"] }).toEqual({ side: s.name, status: String(grpc.status.CANCELLED) });
      await emptied;
    }
  });

  it("ends the call's work when the client cancels it (RST_STREAM), @grpc/grpc-js", async () => {
    for (const s of sides) {
      const client = new grpc.Client(new URL(s.coordinator.url).host, grpc.credentials.createInsecure());
      const md = new grpc.Metadata();
      md.set("authorization", `Bearer ${s.operator}`);
      const queued = new Promise<void>((resolve) => {
        const on = (w: unknown[]) => {
          if (w.length === 0) return;
          s.coordinator.leases.events.off("queue", on);
          resolve();
        };
        s.coordinator.leases.events.on("queue", on);
      });
      const emptied = queueEmptied(s);
      const call = client.makeUnaryRequest(
        "/farm.v1.LeaseService/AcquireLease",
        (m: MessageShape<typeof AcquireLeaseRequestSchema>) => Buffer.from(toBinary(AcquireLeaseRequestSchema, m)),
        (b: Buffer) => fromBinary(AcquireLeaseResponseSchema, b),
        create(AcquireLeaseRequestSchema, { selector: { serial: SERIAL }, waitMs: 600_000, ttlMs: 60_000 }),
        md,
        () => {},
      );
      await queued;
      call.cancel();
      // The coordinator saw the reset: the waiter's place is gone.
      await emptied;
      client.close();
    }
  });

  it("answers random bytes in random pieces with a gRPC status, and keeps serving (seeded)", async () => {
    const s = sides[1]!;
    const session = connect(s.coordinator.url);
    try {
      for (let seed = 1; seed <= 60; seed++) {
        const next = seededRandom(seed);
        const length = Math.floor(next() * 300);
        const bytes = Buffer.from(Array.from({ length }, () => Math.floor(next() * 256)));
        // Now and then a header that claims a plausible length, so the reader goes past the first five bytes.
        if (length >= 5 && next() < 0.5) bytes.writeUInt32BE(Math.floor(next() * (length + 10)), 1);
        const req = session.request({ ":method": "POST", ":path": "/farm.v1.RegistryService/ListDevices", "content-type": "application/grpc", te: "trailers", ...auth(s.operator) });
        let status: unknown;
        req.on("trailers", (t) => (status = t["grpc-status"]));
        req.on("response", (h) => (status ??= h["grpc-status"]));
        req.on("error", () => {});
        req.resume();
        const closed = new Promise((r) => req.on("close", r));
        for (let at = 0; at < bytes.length;) {
          const n = 1 + Math.floor(next() * 40);
          req.write(bytes.subarray(at, at + n));
          at += n;
          await new Promise((r) => setImmediate(r));
        }
        req.end();
        await closed;
        expect({ seed, status: Number(status) >= 0 && Number(status) <= 16 }).toEqual({ seed, status: true });
      }
    } finally {
      session.close();
    }
    expect((await raw(s, "/grpc.health.v1.Health/Check", envelope(0, new Uint8Array(0)))).trailers["grpc-status"]).toBe("0");
    expect(s.lines.filter((l) => l.level === "error")).toEqual([]);
  });

  it("answers a reset mid-request without failing (the stream is gone)", async () => {
    for (const s of sides) {
      const session = connect(s.coordinator.url);
      const req = session.request({ ":method": "POST", ":path": "/farm.v1.RegistryService/ListDevices", "content-type": "application/grpc", ...auth(s.operator) });
      req.on("error", () => {});
      req.write(Buffer.from([0, 0, 0]));
      req.close(h2constants.NGHTTP2_CANCEL);
      await new Promise((r) => req.on("close", r));
      session.close();
      // Still serving.
      expect((await raw(s, "/grpc.health.v1.Health/Check", envelope(0, new Uint8Array(0)))).trailers["grpc-status"]).toBe("0");
      expect(s.lines.filter((l) => l.level === "error")).toEqual([]);
    }
  });
});

/** Resolves when the lease queue is next seen empty after having a waiter. */
function queueEmptied(s: Side): Promise<void> {
  return new Promise((resolve) => {
    let seen = false;
    const on = (w: unknown[]) => {
      if (w.length > 0) seen = true;
      else if (seen) {
        s.coordinator.leases.events.off("queue", on);
        resolve();
      }
    };
    s.coordinator.leases.events.on("queue", on);
  });
}
