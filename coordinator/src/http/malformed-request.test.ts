import { mkdtemp, rm } from "node:fs/promises";
import { connect } from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConnectError } from "@connectrpc/connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { trailerFlag, trailerParse } from "@connectrpc/connect/protocol-grpc-web";
import { toErrorReport } from "@farm/shared/errors";
import { createLogger } from "@farm/shared/log";
import { startCoordinator, type RunningCoordinator } from "../coordinator.js";

let dir: string;
let coordinator: RunningCoordinator;
let secret: string;
const lines: { level: string; msg: string }[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-malformed-"));
  const log = createLogger({ level: "warn", write: (l) => void lines.push(JSON.parse(l) as { level: string; msg: string }) });
  coordinator = await startCoordinator({ listen: { host: "127.0.0.1", port: 0 }, dataDir: join(dir, "data"), dashboardDir: null, log });
  secret = (await coordinator.tokens.create("ci", "user", "operator")).secret;
});

afterAll(async () => {
  await coordinator.close();
  await rm(dir, { recursive: true, force: true });
});

/** One framed message: the compressed flag, its length, its bytes. */
function envelope(compressed: boolean, payload: Uint8Array): Buffer {
  const b = Buffer.alloc(5 + payload.length);
  b[0] = compressed ? 1 : 0;
  b.writeUInt32BE(payload.length, 1);
  b.set(payload, 5);
  return b;
}

/** A raw HTTP/2 call, as a client with a broken encoder would send it. */
async function raw(path: string, contentType: string, body: Buffer): Promise<{ status: number; headers: Record<string, string>; trailers: Record<string, string>; body: Buffer }> {
  const session = connect(coordinator.url);
  try {
    const req = session.request({ ":method": "POST", ":path": path, "content-type": contentType, te: "trailers", authorization: `Bearer ${secret}` });
    const chunks: Buffer[] = [];
    let headers: Record<string, string> = {};
    let trailers: Record<string, string> = {};
    req.on("response", (h) => (headers = h as Record<string, string>));
    req.on("trailers", (t) => (trailers = t as Record<string, string>));
    req.on("data", (d: Buffer) => chunks.push(d));
    req.end(body);
    await new Promise((resolve) => req.on("close", resolve));
    return { status: Number(headers[":status"]), headers, trailers, body: Buffer.concat(chunks) };
  } finally {
    session.close();
  }
}

function grpcReport(r: { headers: Record<string, string>; trailers: Record<string, string> }) {
  const h = new Headers();
  for (const [k, v] of Object.entries({ ...r.headers, ...r.trailers })) if (!k.startsWith(":")) h.set(k, String(v));
  const err = findTrailerError(h);
  expect(err).toBeDefined();
  return toErrorReport(err);
}

/** The error in a gRPC-Web body's trailer frame (its last frame). */
function grpcWebReport(body: Buffer) {
  let at = 0;
  while (at + 5 <= body.length && (body[at]! & trailerFlag) === 0) at += 5 + body.readUInt32BE(at + 1);
  expect(at + 5).toBeLessThanOrEqual(body.length);
  const err = findTrailerError(trailerParse(body.subarray(at + 5, at + 5 + body.readUInt32BE(at + 1))));
  expect(err).toBeDefined();
  return toErrorReport(err);
}

// Bytes that are no protobuf message: a field tag promising more than there is.
const garbage = new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);

describe("a malformed request", () => {
  it("is INVALID_ARGUMENT, unary or streamed, gRPC, gRPC-Web or Connect, and logged at warn, never error", async () => {
    const cases = [
      ["unary, bytes that are no message", await raw("/farm.v1.LeaseService/ListLeases", "application/grpc", envelope(false, garbage))],
      ["unary, a compressed envelope without an encoding", await raw("/farm.v1.LeaseService/ListLeases", "application/grpc", envelope(true, new Uint8Array([1, 2, 3])))],
      ["streamed, a compressed envelope where none is accepted", await raw("/farm.v1.BlobService/UploadBlob", "application/grpc", envelope(true, new Uint8Array([1, 2, 3])))],
      ["streamed, bytes that are no message", await raw("/farm.v1.BlobService/UploadBlob", "application/grpc", envelope(false, garbage))],
    ] as const;
    for (const [name, r] of cases) {
      expect({ name, grpcStatus: r.trailers["grpc-status"] ?? r.headers["grpc-status"] }).toEqual({ name, grpcStatus: "3" });
      expect({ name, ...grpcReport(r) }).toMatchObject({ name, ok: false, code: "INVALID_ARGUMENT" });
    }
    const connectUnary = await raw("/farm.v1.LeaseService/ListLeases", "application/proto", Buffer.from(garbage));
    expect(connectUnary.status).toBe(400);
    expect(toErrorReport(errorFromJsonBytes(connectUnary.body, undefined, new ConnectError("no json")))).toMatchObject({ ok: false, code: "INVALID_ARGUMENT" });
    const webCases = [
      ["gRPC-Web unary, bytes that are no message", await raw("/farm.v1.LeaseService/ListLeases", "application/grpc-web+proto", envelope(false, garbage))],
      ["gRPC-Web streamed, bytes that are no message", await raw("/farm.v1.BlobService/UploadBlob", "application/grpc-web+proto", envelope(false, garbage))],
    ] as const;
    for (const [name, r] of webCases) expect({ name, ...grpcWebReport(r.body) }).toMatchObject({ name, ok: false, code: "INVALID_ARGUMENT" });
    const connectStreamed = await raw("/farm.v1.BlobService/UploadBlob", "application/connect+proto", envelope(false, garbage));
    expect(connectStreamed.body[0]).toBe(2); // the end-of-stream frame
    expect(JSON.parse(connectStreamed.body.subarray(5).toString())).toMatchObject({ error: { code: "invalid_argument" } });
    expect(lines.filter((l) => l.level === "error")).toEqual([]);
    expect(lines.filter((l) => l.level === "warn" && /malformed/.test(l.msg))).toHaveLength(cases.length + webCases.length + 2);
  });
});
