import { mkdtemp, rm } from "node:fs/promises";
import { connect } from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary, type DescMessage } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { toErrorReport } from "@farm/shared/errors";
import { createLogger } from "@farm/shared/log";
import { AttachRequestSchema, AttachResponseSchema, type AttachRequest, type AttachResponse } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { OpenShellRequestSchema } from "@farm/shared/gen/farm/v1/shell_service_pb";
import { WatchScreenRequestSchema } from "@farm/shared/gen/farm/v1/live_screen_service_pb";
import { PROTOCOL_VERSION } from "@farm/shared/version";
import { grpcEnvelope } from "@farm/shared/testing/grpc-envelope";
import { seededRandom } from "@farm/shared/testing/seeded-random";
import { startCoordinator, type RunningCoordinator } from "../coordinator.js";

/**
 * The stream fast path answers as Connect's handler does: every case is
 * sent to two coordinators, one with the stream fast path and one without,
 * and their answers (status, headers, trailers with the error's details,
 * body) must be the same; @grpc/grpc-js attaches through it; random bytes
 * get a status and the coordinator keeps serving.
 */

interface Side {
  name: string;
  coordinator: RunningCoordinator;
  operator: string;
  viewer: string;
  agent: string;
  lines: { level: string; msg: string }[];
}

let dir: string;
const sides: Side[] = [];

async function startSide(name: string, fast: boolean): Promise<Side> {
  const lines: Side["lines"] = [];
  const log = createLogger({ level: "warn", write: (l) => void lines.push(JSON.parse(l) as Side["lines"][number]) });
  const coordinator = await startCoordinator({ listen: { host: "127.0.0.1", port: 0 }, dataDir: join(dir, name), dashboardDir: null, log, streamFastPath: fast });
  const token = async (n: string, kind: "user" | "agent", role?: "viewer" | "operator") => (await coordinator.tokens.create(n, kind, role)).secret;
  return { name, coordinator, operator: await token("ci", "user", "operator"), viewer: await token("watcher", "user", "viewer"), agent: await token("agent-d", "agent"), lines };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-fast-stream-"));
  sides.push(await startSide("connect", false), await startSide("fast", true));
}, 60_000);

afterAll(async () => {
  for (const s of sides) await s.coordinator.close();
  await rm(dir, { recursive: true, force: true });
});

interface RawAnswer {
  headers: Record<string, unknown>;
  trailers: Record<string, unknown>;
  body: string;
}

/** One raw HTTP/2 streaming call: the body is sent and the request ended (or left open: `open`), the whole answer read. */
async function raw(side: Side, path: string, body: Buffer, headers: Record<string, string> = {}, open = false): Promise<RawAnswer> {
  const session = connect(side.coordinator.url);
  try {
    const req = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers });
    let answerHeaders: Record<string, unknown> = {};
    let trailers: Record<string, unknown> = {};
    const chunks: Buffer[] = [];
    req.on("response", (h) => (answerHeaders = { ...h }));
    req.on("data", (d: Buffer) => chunks.push(d));
    req.on("error", () => {});
    const done = new Promise<void>((resolve) => {
      req.on("trailers", (t) => {
        trailers = { ...t };
        resolve();
      });
      req.on("close", () => resolve());
    });
    if (open) req.write(body);
    else req.end(body);
    await done;
    delete answerHeaders["date"];
    return { headers: answerHeaders, trailers, body: Buffer.concat(chunks).toString("base64") };
  } finally {
    session.close();
  }
}

function report(a: RawAnswer) {
  const h = new Headers();
  for (const [k, v] of Object.entries({ ...a.headers, ...a.trailers })) if (!k.startsWith(":")) h.set(k, String(v));
  return toErrorReport(findTrailerError(h) ?? new ConnectError("no error"));
}

const auth = (token: string) => ({ authorization: `Bearer ${token}` });
const msg = <D extends DescMessage>(schema: D, init: Parameters<typeof create<D>>[1]) => grpcEnvelope(0, toBinary(schema, create(schema, init)));
const hello = (agentId: string) => msg(AttachRequestSchema, { kind: { case: "hello", value: { agentId, name: agentId, hostname: "h", protocolVersion: PROTOCOL_VERSION, agentVersion: "t", heartbeatIntervalMs: 60_000 } } });

async function same(name: string, call: (s: Side) => Promise<RawAnswer>): Promise<RawAnswer> {
  const [a, b] = [await call(sides[0]!), await call(sides[1]!)];
  const timeless = (r: RawAnswer) => ({ ...r, headers: { ...r.headers, "server-timing": String(r.headers["server-timing"] ?? "").replace(/;dur=[\d.]+/g, "") } });
  expect({ name, ...timeless(b) }).toEqual({ name, ...timeless(a) });
  return b;
}

async function fastStreams(s: Side): Promise<number> {
  const r = await fetch(`${s.coordinator.url}/metrics`);
  const m = /^farm_stream_fast_path_calls_total (\d+)$/m.exec(await r.text());
  return Number(m?.[1] ?? NaN);
}

describe("the stream fast path against Connect's handler", () => {
  it("answers every outcome with Connect's headers, trailers, details and body", async () => {
    const before = await fastStreams(sides[1]!);
    const attach = "/farm.v1.AgentService/Attach";
    // An agent that says hello and ends its side: the hello is accepted, then the stream ends.
    const accepted = await same("an agent's hello", (s) => raw(s, attach, hello("agent-d"), auth(s.agent)));
    expect(fromBinary(AttachResponseSchema, Buffer.from(accepted.body, "base64").subarray(5)).kind.case).toBe("helloAccepted");
    expect(report(await same("a user token on the agents' stream", (s) => raw(s, attach, hello("agent-d"), auth(s.operator))))).toMatchObject({ code: "PERMISSION_DENIED" });
    expect(report(await same("no token", (s) => raw(s, attach, hello("agent-d"))))).toMatchObject({ code: "UNAUTHENTICATED" });
    expect(report(await same("bytes that are no message", (s) => raw(s, attach, grpcEnvelope(0, new Uint8Array([0xff, 0xff, 0xff])), auth(s.agent))))).toMatchObject({ code: "INVALID_ARGUMENT" });
    expect(report(await same("a compressed envelope, no encoding", (s) => raw(s, attach, grpcEnvelope(1, new Uint8Array([1])), auth(s.agent))))).toMatchObject({ code: "INVALID_ARGUMENT" });
    expect((await same("a cut envelope", (s) => raw(s, attach, hello("agent-d").subarray(0, 3), auth(s.agent)))).trailers["grpc-status"]).toBe("3");
    expect((await same("a bad grpc-timeout", (s) => raw(s, attach, hello("agent-d"), { ...auth(s.agent), "grpc-timeout": "soon" }))).trailers["grpc-status"]).toBe("3");
    expect((await same("no message on a server stream", (s) => raw(s, "/farm.v1.LiveScreenService/WatchScreen", Buffer.alloc(0), auth(s.viewer)))).trailers["grpc-status"]).toBe("12");
    const watch = msg(WatchScreenRequestSchema, { target: { serial: "nope" } });
    expect((await same("two messages on a server stream", (s) => raw(s, "/farm.v1.LiveScreenService/WatchScreen", Buffer.concat([watch, watch]), auth(s.viewer)))).trailers["grpc-status"]).toBe("12");
    expect(report(await same("a phone that is not there", (s) => raw(s, "/farm.v1.LiveScreenService/WatchScreen", watch, auth(s.viewer))))).toMatchObject({ code: "DEVICE_NOT_FOUND" });
    expect(report(await same("a viewer opens a shell", (s) => raw(s, "/farm.v1.ShellService/OpenShell", msg(OpenShellRequestSchema, { kind: { case: "start", value: { target: { serial: "x" } } } }), auth(s.viewer))))).toMatchObject({
      code: "PERMISSION_DENIED",
    });
    // Refused from the envelope's header while the client is still sending (the live screen request's cap is 4 KiB).
    const tooLarge = await same("a message over the cap, still sending", (s) => raw(s, "/farm.v1.LiveScreenService/WatchScreen", grpcEnvelope(0, new Uint8Array(10), 1024 * 1024), auth(s.viewer), true));
    expect(tooLarge.trailers["grpc-status"]).toBe("8");
    for (const s of sides) expect(s.lines.filter((l) => l.level === "error")).toEqual([]);
    // Served by the fast path (the gate refused the call without a token); the other coordinator by Connect's handler.
    expect(await fastStreams(sides[1]!)).toBe(before + 11);
    expect(await fastStreams(sides[0]!)).toBe(0);
  });

  it("attaches @grpc/grpc-js as an agent over a bidi stream, on both", async () => {
    for (const s of sides) {
      const client = new grpc.Client(new URL(s.coordinator.url).host, grpc.credentials.createInsecure());
      const md = new grpc.Metadata();
      md.set("authorization", `Bearer ${s.agent}`);
      const call = client.makeBidiStreamRequest(
        "/farm.v1.AgentService/Attach",
        (m: AttachRequest) => Buffer.from(toBinary(AttachRequestSchema, m)),
        (b: Buffer) => fromBinary(AttachResponseSchema, b),
        md,
      );
      const first = new Promise<AttachResponse | Error>((resolve) => {
        call.once("data", resolve);
        call.on("error", resolve);
      });
      call.write(fromBinary(AttachRequestSchema, hello("agent-d").subarray(5)));
      const answer = await first;
      expect({ side: s.name, first: answer instanceof Error ? answer.message : answer.kind.case }).toEqual({ side: s.name, first: "helloAccepted" });
      const ended = new Promise((r) => call.on("status", r));
      call.cancel();
      await ended;
      client.close();
    }
  });

  it("answers random bytes in random pieces on a stream with a gRPC status, and keeps serving (seeded)", async () => {
    const s = sides[1]!;
    const session = connect(s.coordinator.url);
    try {
      for (let seed = 1; seed <= 40; seed++) {
        const next = seededRandom(seed);
        const length = Math.floor(next() * 300);
        const bytes = Buffer.from(Array.from({ length }, () => Math.floor(next() * 256)));
        if (length >= 5 && next() < 0.5) bytes.writeUInt32BE(Math.floor(next() * (length + 10)), 1);
        const req = session.request({ ":method": "POST", ":path": "/farm.v1.LiveScreenService/WatchScreen", "content-type": "application/grpc", te: "trailers", ...auth(s.viewer) });
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
    expect((await raw(s, "/farm.v1.AgentService/Attach", hello("agent-d"), auth(s.agent))).trailers["grpc-status"]).toBe("0");
    expect(s.lines.filter((l) => l.level === "error")).toEqual([]);
  });
});
