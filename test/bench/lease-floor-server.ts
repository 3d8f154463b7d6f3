/**
 * Floor (c) of the replicas bench's lease table: what one replica does per
 * lease cycle with no farm code in the way. A bare `node:http2` server
 * (`POST /grant`, `POST /release`, the body the holder or the phone id) that
 * runs the floor's two statements on a pg pool, sends each change's notice
 * (a lease-row-sized JSON payload, as its own statement, not awaited by the
 * answer, as a replica's bus does) and listens for the others' notices,
 * parsing those not its own. No TLS, auth, protobuf or framing beyond HTTP/2.
 *
 *   node test/dist/bench/lease-floor-server.js <postgres url>   (prints its port, exits when stdin ends)
 */
import { createServer } from "node:http2";
import { randomUUID } from "node:crypto";
import type { Socket } from "node:net";
import pg from "pg";

const url = process.argv[2];
if (!url) throw new Error("usage: lease-floor-server.js <postgres url>");
const me = String(process.pid);
const pool = new pg.Pool({ connectionString: url, max: 10 });
const listener = new pg.Client({ connectionString: url });
await listener.connect();
let heard = 0;
listener.on("notification", (n) => {
  const m = JSON.parse(n.payload ?? "{}") as { f?: string };
  if (m.f !== me) heard++;
});
await listener.query("LISTEN bench_floor");

/** A notice the size of a replica's lease notice (the row as committed, about 400 bytes). */
function notice(id: number, holder: string, state: string): string {
  const now = Date.now();
  const row = { leaseId: randomUUID(), tokenHash: "0".repeat(64), holder, physicalId: `pd-${id}`, agentId: "agent-0", serial: `S-${id}`, acquiredAt: now, expiresAt: now + 60_000, ttlMs: 60_000, state, endedAt: null };
  return JSON.stringify({ f: me, k: "lease", i: row.leaseId, d: row });
}

function tell(payload: string): void {
  pool.query("SELECT pg_notify('bench_floor', $1)", [payload]).catch((err: Error) => process.stderr.write(`notice failed: ${err.message}\n`));
}

const server = createServer();
// Nagle off, as farm's coordinator has it.
server.on("connection", (socket: Socket) => socket.setNoDelay(true));
server.on("stream", (stream, headers) => {
  const chunks: Buffer[] = [];
  stream.on("data", (c: Buffer) => chunks.push(c));
  stream.on("end", () => {
    const body = Buffer.concat(chunks).toString();
    const answer = async (): Promise<string> => {
      if (headers[":path"] === "/grant") {
        const g = await pool.query<{ id: number }>(
          "UPDATE bench_floor_phones SET holder = $1 WHERE id = (SELECT id FROM bench_floor_phones WHERE holder IS NULL LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id",
          [body],
        );
        const id = g.rows[0]?.id;
        if (id !== undefined) tell(notice(id, body, "active"));
        return id === undefined ? "" : String(id);
      }
      await pool.query("UPDATE bench_floor_phones SET holder = NULL WHERE id = $1", [Number(body)]);
      tell(notice(Number(body), "", "released"));
      return "ok";
    };
    answer().then(
      (text) => {
        stream.respond({ ":status": 200 });
        stream.end(text);
      },
      (err: Error) => {
        stream.respond({ ":status": 500 });
        stream.end(err.message);
      },
    );
  });
});
server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  process.stdout.write(`${typeof address === "object" && address ? address.port : 0}\n`);
});
process.stdin.on("end", () => {
  process.stderr.write(`lease floor server ${me}: heard ${heard} notices of the others\n`);
  server.close();
  void Promise.all([pool.end(), listener.end()]).then(() => process.exit(0));
});
process.stdin.resume();
