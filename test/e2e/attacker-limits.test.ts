/**
 * Limits before work, played by an attacker on loopback against a real
 * coordinator process with a real agent attached: idle and half-open
 * sockets are closed, unauthenticated bodies are refused from their headers
 * (memory stays flat, the agent stays attached), announced and actual sizes
 * are capped per method, blob uploads have a per-user quota, command text is
 * private to its caller and admins, and state files are 0600.
 */
import { connect as netConnect, type Socket } from "node:net";
import { connect as h2Connect, type ClientHttp2Session } from "node:http2";
import { readdirSync, statSync, writeFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { BlobService, type UploadBlobRequest, UploadBlobRequestSchema } from "@farm/shared/gen/farm/v1/blob_service_pb";
import { WatchService } from "@farm/shared/gen/farm/v1/watch_service_pb";
import { ListTokensRequestSchema } from "@farm/shared/gen/farm/v1/token_service_pb";
import { farmTransport } from "@farm/shared/farm-transport";
import { toErrorReport } from "@farm/shared/errors";
import { adbConnect, SimDevice } from "../devsim/index.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";

const REQUEST_TIMEOUT_MS = 1_000;
const BLOB_QUOTA = 3 * 1024 * 1024;
const PRINCIPAL_STREAMS = 6;

let lab: SplitFarm;
let port: number;
let serial: string;
const phones: SimDevice[] = [];
const users: Record<string, { token: string; env: NodeJS.ProcessEnv }> = {};

async function user(name: string): Promise<{ token: string; env: NodeJS.ProcessEnv }> {
  const r = await farm(["token", "create", "--kind", "user", "--name", name], lab.env);
  if (r.code !== 0) throw new Error(r.stdout + r.stderr);
  const token = String(r.json["token"]);
  return { token, env: { ...lab.env, FARM_TOKEN: token } };
}

beforeAll(async () => {
  lab = await startSplitFarm("attacker-limits", {
    coordinatorArgs: [
      "--request-timeout",
      `${REQUEST_TIMEOUT_MS}ms`,
      "--idle-timeout",
      "2s",
      "--blob-quota",
      String(BLOB_QUOTA),
      "--max-streams-per-principal",
      String(PRINCIPAL_STREAMS),
      "--max-streams-per-connection",
      "50",
    ],
  });
  port = Number(new URL(lab.url).port);
  const phone = new SimDevice({ serialno: "ATTACK1" });
  phones.push(phone);
  serial = await adbConnect(lab.adb.port, "127.0.0.1", await phone.listen());
  for (const name of ["alice", "bob", "carol"]) users[name] = await user(name);
  await waitFor("the phone online", async () => {
    const r = await farm(["devices"], lab.env);
    return ((r.json["devices"] ?? []) as { serial: string; state: string }[]).some((d) => d.serial === serial && d.state === "device") ? true : undefined;
  });
});

afterAll(async () => {
  for (const p of phones) await p.close();
  await lab?.stop();
});

/** The coordinator's resident set and its peak since the last reset, in bytes. */
function memory(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kb("VmRSS"), hwm: kb("VmHWM") };
}

/** The single agent as `farm agents` lists it. */
async function theAgent(): Promise<{ online: boolean; connectedTime: string }> {
  const r = await farm(["agents"], lab.env);
  return (r.json["agents"] as { online: boolean; connectedTime: string }[])[0] as { online: boolean; connectedTime: string };
}

/**
 * Sends an HTTP/1.1 request head and then up to `bodyBytes` of body, as fast
 * as the server takes it; resolves with what came back when the connection ends.
 */
function h1Send(head: string, bodyBytes: number, { maxMs = 20_000 } = {}): Promise<{ response: string; sent: number }> {
  return new Promise((resolve) => {
    const socket = netConnect(port, "127.0.0.1");
    let response = "";
    let sent = 0;
    const chunk = Buffer.alloc(1024 * 1024);
    const timer = setTimeout(() => socket.destroy(), maxMs);
    const pump = () => {
      while (sent < bodyBytes && !socket.destroyed) {
        const n = Math.min(chunk.length, bodyBytes - sent);
        sent += n;
        if (!socket.write(chunk.subarray(0, n))) return void socket.once("drain", pump);
      }
    };
    socket.on("connect", () => {
      socket.write(head);
      pump();
    });
    socket.on("data", (d: Buffer) => {
      response += d.toString("latin1");
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      clearTimeout(timer);
      resolve({ response, sent });
    });
  });
}

function statusOf(response: string): number | undefined {
  const m = /^HTTP\/1\.1 (\d{3})/.exec(response);
  return m ? Number(m[1]) : undefined;
}

/** An HTTP/2 request with `bodyBytes` of body; resolves with the response headers (gRPC status) and what was sent. */
function h2Send(session: ClientHttp2Session, headers: Record<string, string>, bodyBytes: number, { maxMs = 20_000 } = {}): Promise<{ headers: Record<string, unknown>; sent: number }> {
  return new Promise((resolve) => {
    const stream = session.request({ ":method": "POST", ...headers });
    let sent = 0;
    let got: Record<string, unknown> = {};
    const chunk = Buffer.alloc(1024 * 1024);
    const timer = setTimeout(() => stream.close(), maxMs);
    const pump = () => {
      while (sent < bodyBytes && !stream.destroyed && !stream.closed) {
        const n = Math.min(chunk.length, bodyBytes - sent);
        sent += n;
        if (!stream.write(chunk.subarray(0, n))) return void stream.once("drain", pump);
      }
      if (sent >= bodyBytes) stream.end();
    };
    stream.on("response", (h) => {
      got = { ...got, ...h };
    });
    stream.on("trailers", (t) => {
      got = { ...got, ...t };
    });
    stream.on("data", () => {});
    stream.on("error", () => {});
    stream.on("close", () => {
      clearTimeout(timer);
      resolve({ headers: got, sent });
    });
    // A gRPC message header announcing the whole body as one message.
    const envelope = Buffer.alloc(5);
    envelope.writeUInt32BE(Math.max(0, Math.min(bodyBytes - 5, 0xffffffff)), 1);
    stream.write(envelope);
    sent += 5;
    pump();
  });
}

function h2Session(): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const s = h2Connect(lab.url);
    s.once("remoteSettings", () => resolve(s));
    s.once("error", reject);
  });
}

describe("connection hygiene", () => {
  it("closes 300 idle and half-open sockets once the request timeout passes", async () => {
    const sockets: { socket: Socket; closedAt?: number }[] = [];
    const t0 = Date.now();
    for (let i = 0; i < 300; i++) {
      const socket = netConnect(port, "127.0.0.1");
      const entry: { socket: Socket; closedAt?: number } = { socket };
      socket.on("error", () => {});
      // Read what the server sends (SETTINGS, a 408): the end of a stream is seen only after its data.
      socket.resume();
      socket.on("close", () => (entry.closedAt = Date.now()));
      socket.on("connect", () => {
        // Silence, half a preface, half a request head, a whole preface and no stream.
        if (i % 4 === 1) socket.write("PRI * HTTP/2.0\r\n");
        if (i % 4 === 2) socket.write("POST /farm.v1.TokenService/ListTokens HTTP/1.1\r\nHost: x\r\n");
        if (i % 4 === 3) socket.write(Buffer.concat([Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])]));
      });
      sockets.push(entry);
    }
    try {
      const bound = REQUEST_TIMEOUT_MS * 3 + 2_000;
      await waitFor("every idle socket closed", () => (sockets.every((s) => s.closedAt !== undefined) ? true : undefined), { timeoutMs: bound, intervalMs: 100 });
      const last = Math.max(...sockets.map((s) => s.closedAt as number));
      expect(last - t0).toBeLessThan(bound);
      // The agent's long-lived connection is not idle: it stays attached.
      expect((await theAgent()).online).toBe(true);
    } finally {
      for (const s of sockets) s.socket.destroy();
    }
  });

  it("caps concurrent streams per connection (SETTINGS) and per principal", async () => {
    const session = await h2Session();
    try {
      expect(session.remoteSettings.maxConcurrentStreams).toBe(50);
    } finally {
      session.close();
    }
    const watch = createClient(WatchService, farmTransport({ url: lab.url, token: (users["carol"] as { token: string }).token }));
    const aborts: AbortController[] = [];
    const opened: Promise<unknown>[] = [];
    try {
      for (let i = 0; i < PRINCIPAL_STREAMS; i++) {
        const ac = new AbortController();
        aborts.push(ac);
        const it = watch.watch({}, { signal: ac.signal })[Symbol.asyncIterator]();
        opened.push(it.next());
      }
      await Promise.all(opened);
      const extra = new AbortController();
      aborts.push(extra);
      const refused = await (async () => {
        try {
          for await (const _ of watch.watch({}, { signal: extra.signal })) return undefined;
        } catch (err) {
          return toErrorReport(err);
        }
        return undefined;
      })();
      expect(refused?.code).toBe("TOO_MANY_STREAMS");
      // Another user is not affected by carol's streams.
      const other = await farm(["activity", "--limit", "1"], (users["bob"] as { env: NodeJS.ProcessEnv }).env);
      expect(other.code).toBe(0);
    } finally {
      for (const a of aborts) a.abort();
    }
  });
});

describe("limits before work", () => {
  it("refuses four concurrent 200 MB unauthenticated bodies from their headers: memory stays flat, the agent stays attached", async () => {
    const agentBefore = await theAgent();
    expect(agentBefore.online).toBe(true);
    const pid = lab.coordinator.pid;
    // Settle, then reset the peak (VmHWM) so it measures only the flood.
    await new Promise((r) => setTimeout(r, 300));
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
    const baseline = memory(pid);
    const MB200 = 200 * 1024 * 1024;
    const h2a = await h2Session();
    const h2b = await h2Session();
    let peak = baseline.rss;
    const sampler = setInterval(() => (peak = Math.max(peak, memory(pid).rss)), 20);
    try {
      const [unary, streamed, grpcUnary, grpcStream] = await Promise.all([
        h1Send(`POST /farm.v1.DeviceService/RunShell HTTP/1.1\r\nHost: x\r\nContent-Type: application/proto\r\nContent-Length: ${MB200}\r\n\r\n`, MB200),
        h1Send(`POST /farm.v1.BlobService/UploadBlob HTTP/1.1\r\nHost: x\r\nContent-Type: application/connect+proto\r\nTransfer-Encoding: chunked\r\n\r\n${(MB200 - 16).toString(16)}\r\n`, MB200),
        h2Send(h2a, { ":path": "/farm.v1.RegistryService/ListDevices", "content-type": "application/grpc", te: "trailers" }, MB200),
        h2Send(h2b, { ":path": "/farm.v1.AgentBlobService/PutBlob", "content-type": "application/grpc", te: "trailers" }, MB200),
      ]);
      clearInterval(sampler);
      const after = memory(pid);
      peak = Math.max(peak, after.hwm);
      const delta = peak - baseline.rss;
      console.log(
        `coordinator RSS baseline ${(baseline.rss / 2 ** 20).toFixed(1)} MiB, peak under flood ${(peak / 2 ** 20).toFixed(1)} MiB (+${(delta / 2 ** 20).toFixed(1)} MiB, x${(peak / baseline.rss).toFixed(2)}); bytes the attackers got out: ${
          [unary.sent, streamed.sent, grpcUnary.sent, grpcStream.sent].map((n) => `${(n / 2 ** 20).toFixed(1)} MiB`).join(", ")
        }`,
      );
      expect(statusOf(unary.response)).toBe(401);
      expect(statusOf(streamed.response)).toBe(200);
      expect(streamed.response).toContain("unauthenticated");
      expect(grpcUnary.headers["grpc-status"]).toBe("16");
      expect(grpcStream.headers["grpc-status"]).toBe("16");
      expect(delta).toBeLessThan(50 * 1024 * 1024);
    } finally {
      clearInterval(sampler);
      h2a.close();
      h2b.close();
    }
    const agentAfter = await theAgent();
    expect(agentAfter.online).toBe(true);
    expect(agentAfter.connectedTime).toBe(agentBefore.connectedTime);
  });

  it("refuses a body that announces 1 TiB at the header, even with a valid token", async () => {
    const admin = String(lab.env["FARM_TOKEN"]);
    const TiB = 2 ** 40;
    const t0 = Date.now();
    const [streamed, unary, anonymous] = await Promise.all([
      h1Send(`POST /farm.v1.BlobService/UploadBlob HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${admin}\r\nContent-Type: application/connect+proto\r\nContent-Length: ${TiB}\r\n\r\n`, 0, { maxMs: 5_000 }),
      h1Send(`POST /farm.v1.TokenService/ListTokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${admin}\r\nContent-Type: application/proto\r\nContent-Length: ${TiB}\r\n\r\n`, 0, { maxMs: 5_000 }),
      h1Send(`POST /dashboard/api/sign-in HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${TiB}\r\n\r\n`, 0, { maxMs: 5_000 }),
    ]);
    expect(Date.now() - t0).toBeLessThan(4_000);
    expect(streamed.response).toMatch(/resource_exhausted/);
    expect(streamed.response).toContain("MESSAGE_TOO_LARGE");
    expect(statusOf(unary.response)).toBe(429);
    expect(statusOf(anonymous.response)).toBe(413);
  });

  it("refuses an oversized control message, by announcement and by its actual size", async () => {
    const admin = String(lab.env["FARM_TOKEN"]);
    // A well-formed ListTokens request padded with 2 MiB of unknown field bytes.
    const padding = Buffer.concat([Buffer.from([0xc2, 0x3e]), encodeVarint(2 * 1024 * 1024), Buffer.alloc(2 * 1024 * 1024)]);
    const body = Buffer.concat([Buffer.from(toBinary(ListTokensRequestSchema, create(ListTokensRequestSchema))), padding]);
    const announced = await h1Send(
      `POST /farm.v1.TokenService/ListTokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${admin}\r\nContent-Type: application/proto\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
      body.length,
      { maxMs: 5_000 },
    );
    expect(statusOf(announced.response)).toBe(429);
    const session = await h2Session();
    try {
      const streamed = await h2Send(session, { ":path": "/farm.v1.TokenService/ListTokens", "content-type": "application/grpc", te: "trailers", authorization: `Bearer ${admin}` }, body.length + 5, { maxMs: 5_000 });
      expect(streamed.headers["grpc-status"]).toBe("8");
    } finally {
      session.close();
    }
  });

  it("refuses a blob beyond the user's quota from its announced size, before any byte of it", async () => {
    const alice = users["alice"] as { token: string };
    const bob = users["bob"] as { token: string };
    const blobs = (token: string) => createClient(BlobService, farmTransport({ url: lab.url, token }));
    const sha = (await import("node:crypto")).createHash("sha256").update(new Uint8Array(2 * 1024 * 1024)).digest("hex");
    const first = async function* (): AsyncGenerator<UploadBlobRequest> {
      yield create(UploadBlobRequestSchema, { part: { kind: { case: "header", value: { size: BigInt(2 * 1024 * 1024), sha256: sha, name: "a.apk" } } } });
      // 1 MiB chunks, as clients send them.
      for (let i = 0; i < 2; i++) yield create(UploadBlobRequestSchema, { part: { kind: { case: "chunk", value: new Uint8Array(1024 * 1024) } } });
    };
    const stored = await blobs(alice.token).uploadBlob(first());
    expect(stored.blobId).toMatch(/^[0-9a-f-]{36}$/);
    // The second announces 2 MiB more than the 3 MiB quota allows and then sends nothing:
    // the refusal must come from the header alone.
    let sentChunk = false;
    const stalled = async function* (): AsyncGenerator<UploadBlobRequest> {
      yield create(UploadBlobRequestSchema, { part: { kind: { case: "header", value: { size: BigInt(2 * 1024 * 1024), sha256: sha, name: "b.apk" } } } });
      await new Promise((r) => setTimeout(r, 10_000));
      sentChunk = true;
    };
    const refused = await blobs(alice.token)
      .uploadBlob(stalled(), { timeoutMs: 8_000 })
      .then(() => undefined, (err: unknown) => toErrorReport(err));
    expect(refused?.code).toBe("QUOTA_EXCEEDED");
    expect(refused?.field).toBe("size");
    expect(sentChunk).toBe(false);
    // Per user: bob still has his own quota.
    const bobs = await blobs(bob.token).uploadBlob(first());
    expect(bobs.blobId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("caps shell command and setprop value lengths at the coordinator, before routing", async () => {
    const env = (users["alice"] as { env: NodeJS.ProcessEnv }).env;
    // An unknown serial: a coordinator-side check answers before routing would say DEVICE_NOT_FOUND.
    const shell = await farm(["shell", "--device", "NO-SUCH-PHONE", "--", "echo", "x".repeat(40 * 1024)], env);
    expect(shell.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "command", dispatched: false });
    const setprop = await farm(["device", "setprop", "--device", "NO-SUCH-PHONE", "debug.farm.x", "y".repeat(5_000)], env);
    expect(setprop.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "value", dispatched: false });
  });
});

describe("privacy", () => {
  it("shows a shell command or property value in full only to its caller and admins; others see a name and a keyed hash", async () => {
    const alice = users["alice"] as { env: NodeJS.ProcessEnv };
    const bob = users["bob"] as { env: NodeJS.ProcessEnv };
    const lease = await farm(["lease", "acquire", "--device", serial, "--ttl", "5m", "--wait", "20s"], alice.env);
    expect(lease.code).toBe(0);
    const withLease = { ...alice.env, FARM_LEASE: String((lease.json["lease"] as { token: string }).token) };
    const secret = "s3cr3t-api-key-7f1e";
    const ran = await farm(["shell", "--device", serial, "--", "echo", secret], withLease);
    expect(ran.code).toBe(0);
    // Keyed (HMAC-SHA256 under the coordinator's summary key): a plain sha256 would let anyone test a guess.
    const key = readFileSync(join(lab.dir.path, "coordinator", "summary.key"));
    const { createHash, createHmac } = await import("node:crypto");
    const hash = createHmac("sha256", key).update(`echo ${secret}`).digest("hex");
    const plainHash = createHash("sha256").update(`echo ${secret}`).digest("hex");

    const activity = async (env: NodeJS.ProcessEnv) => {
      const r = await farm(["activity", "--device", serial], env);
      expect(r.code).toBe(0);
      return (r.json["entries"] as { command: string; caller: string; detail: string }[]).find((e) => e.command === "runShell" && e.caller === "alice");
    };
    const [seenByAlice, seenByAdmin, seenByBob] = await Promise.all([activity(alice.env), activity(lab.env), activity(bob.env)]);
    expect(seenByAlice?.detail).toContain(secret);
    expect(seenByAdmin?.detail).toContain(secret);
    expect(seenByBob?.detail).not.toContain(secret);
    expect(seenByBob?.detail).toContain("echo");
    expect(seenByBob?.detail).toContain(hash);
    expect(seenByBob?.detail).not.toContain(plainHash);

    const ownership = async (env: NodeJS.ProcessEnv) => {
      const r = await farm(["device", "ownership", "status", "--device", serial], env);
      expect(r.code).toBe(0);
      return JSON.stringify(r.json);
    };
    const [alicesView, adminsView, bobsView] = await Promise.all([ownership(alice.env), ownership(lab.env), ownership(bob.env)]);
    expect(alicesView).toContain(secret);
    expect(adminsView).toContain(secret);
    expect(bobsView).not.toContain(secret);
    expect(bobsView).toContain(hash);
    expect(bobsView).not.toContain(plainHash);

    // A property value may be a secret too: its key is shown, its value only as a hash.
    const set = await farm(["device", "setprop", "--device", serial, "debug.farm.secret", secret], withLease);
    expect(set.json).toMatchObject({ ok: true });
    const valueHash = createHmac("sha256", key).update(secret).digest("hex");
    const propActivity = async (env: NodeJS.ProcessEnv) =>
      ((await farm(["activity", "--device", serial], env)).json["entries"] as { command: string; caller: string; detail: string }[]).find((e) => e.command === "setProperty" && e.caller === "alice");
    expect((await propActivity(alice.env))?.detail).toBe(`debug.farm.secret=${secret}`);
    expect((await propActivity(bob.env))?.detail).toBe(`debug.farm.secret=[hmac:${valueHash}]`);
    const bobsStatus = JSON.stringify((await farm(["device", "ownership", "status", "--device", serial], bob.env)).json);
    expect(bobsStatus).not.toContain(secret);
    expect(bobsStatus).toContain(valueHash);
    expect(JSON.stringify((await farm(["device", "ownership", "status", "--device", serial], alice.env)).json)).toContain(secret);
    await farm(["lease", "release", "--lease", String((lease.json["lease"] as { token: string }).token)], alice.env);
  });

  it("keeps database, key and lock files private (0600)", async () => {
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const p = join(dir, name);
        const s = statSync(p);
        if (s.isDirectory()) walk(p);
        else if (/\.db(-wal|-shm|-journal)?$|\.lock$|\.holder\.json$|^summary\.key$/.test(name)) files.push(p);
      }
    };
    walk(join(lab.dir.path, "coordinator"));
    walk(join(lab.dir.path, "agent"));
    walk(join(lab.dir.path, "locks"));
    expect(files.some((f) => f.endsWith("coordinator.db"))).toBe(true);
    expect(files.some((f) => f.endsWith("coordinator.db-wal"))).toBe(true);
    expect(files.some((f) => f.endsWith("agent.db"))).toBe(true);
    expect(files.some((f) => f.endsWith("summary.key"))).toBe(true);
    expect(files.some((f) => f.endsWith(".lock"))).toBe(true);
    const loose = files.filter((f) => (statSync(f).mode & 0o077) !== 0).map((f) => `${f} ${(statSync(f).mode & 0o777).toString(8)}`);
    expect(loose).toEqual([]);
  });
});

function encodeVarint(n: number): Buffer {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Buffer.from(out);
}
