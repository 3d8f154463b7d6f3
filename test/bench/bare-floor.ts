/**
 * The bare floors a routed call is judged against, measured by the
 * benchmark that needs them in the same run (routing-overhead.ts):
 *
 * - a unary hop on bare `node:http2`: a kept session to a server in a
 *   process of its own, gRPC-shaped (a small body each way, trailers);
 * - a round trip on an open bidi stream of that server (what the agent's
 *   control stream costs at the least);
 * - one durable SQLite commit (WAL, synchronous=FULL: one fsync), as the
 *   journal's "pending" entry makes before a dispatch.
 *
 * No farm code runs in any of them.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { connect, type ClientHttp2Session, type ClientHttp2Stream } from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import Database from "better-sqlite3";

// The server, in a process of its own so that each side has its own event loop (as client and coordinator do).
const SERVER = `
const http2 = require("node:http2");
const server = http2.createServer();
server.on("stream", (stream, headers) => {
  if (headers[":path"] === "/unary") {
    const chunks = [];
    stream.on("data", (c) => chunks.push(c));
    stream.on("end", () => {
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(Buffer.concat(chunks));
    });
    return;
  }
  stream.respond({ ":status": 200, "content-type": "application/grpc" });
  stream.on("data", (c) => stream.write(c));
  stream.on("end", () => stream.end());
});
server.listen(0, "127.0.0.1", () => process.stdout.write(server.address().port + "\\n"));
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
`;

/** A gRPC-framed small message (5-byte prefix, 40 bytes), as small as a routed shell's request. */
const MESSAGE = Buffer.concat([Buffer.from([0, 0, 0, 0, 40]), Buffer.alloc(40, 7)]);

export interface BareFloor {
  /** One unary request/response on the kept session, in ms. */
  unary(): Promise<number>;
  /** One round trip on the open stream, in ms. */
  streamRoundTrip(): Promise<number>;
  /** One durable commit of a ~600-byte row, in ms. */
  commit(): number;
  close(): Promise<void>;
}

export async function startBareFloor(): Promise<BareFloor> {
  const child: ChildProcess = spawn(process.execPath, ["-e", SERVER], { stdio: ["pipe", "pipe", "inherit"] });
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).once("line", (l) => resolve(Number(l)));
    child.once("exit", (code) => reject(new Error(`bare http2 server exited with ${code}`)));
  });
  const session: ClientHttp2Session = connect(`http://127.0.0.1:${port}`);
  await new Promise<void>((resolve, reject) => session.once("connect", () => resolve()).once("error", reject));
  const open: ClientHttp2Stream = session.request({ ":method": "POST", ":path": "/stream", "content-type": "application/grpc", te: "trailers" });
  let waiting: (() => void) | undefined;
  open.on("data", () => waiting?.());

  const dir = mkdtempSync(join(tmpdir(), "farm-bare-commit-"));
  const db = new Database(join(dir, "commit.db"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = FULL");
  db.exec("CREATE TABLE t (id TEXT PRIMARY KEY, body TEXT NOT NULL)");
  const insert = db.prepare("INSERT INTO t (id, body) VALUES (?, ?)");
  const body = "x".repeat(600);
  let n = 0;

  return {
    unary: () =>
      new Promise<number>((resolve, reject) => {
        const t = performance.now();
        const s = session.request({ ":method": "POST", ":path": "/unary", "content-type": "application/grpc", te: "trailers" });
        s.on("data", () => undefined);
        s.once("trailers", () => resolve(performance.now() - t));
        s.once("error", reject);
        s.end(MESSAGE);
      }),
    streamRoundTrip: () =>
      new Promise<number>((resolve) => {
        const t = performance.now();
        waiting = () => {
          waiting = undefined;
          resolve(performance.now() - t);
        };
        open.write(MESSAGE);
      }),
    commit: () => {
      const t = performance.now();
      insert.run(String(++n), body);
      return performance.now() - t;
    },
    async close() {
      // Whatever the server's side does as it goes, the floor is measured already.
      open.on("error", () => undefined);
      session.on("error", () => undefined);
      open.end();
      await new Promise<void>((resolve) => session.close(() => resolve()));
      db.close();
      rmSync(dir, { recursive: true, force: true });
      child.stdin?.end();
      await new Promise((resolve) => child.once("exit", resolve));
    },
  };
}
