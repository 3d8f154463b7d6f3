import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, type FileHandle } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toErrorReport } from "@farm/shared/errors";
import { ShortWriteError, writeAll } from "@farm/shared/verified-file";
import { PullEvidenceResponseSchema, type PullEvidenceResponse } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { writePulledBundle } from "./bundle-writer.js";

const evidenceId = "7c122f86-0239-4be4-9aff-a41ec0e4c381";
const t0 = "2026-11-30T05:59:35.628Z";
const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

let root: string;
/** A 64 KiB tmpfs, when this process may mount one (root in CI and here). */
let tiny: string | null = null;
let tinyWhyNot = "";

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "farm-bundle-writer-"));
  const mnt = join(root, "tiny");
  await mkdir(mnt);
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", mnt], { stdio: "pipe" });
    tiny = mnt;
  } catch (err) {
    tinyWhyNot = `cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): ${(err as Error).message.split("\n")[0]}`;
  }
});

afterAll(async () => {
  if (tiny) execFileSync("umount", [tiny]);
  await rm(root, { recursive: true, force: true });
});

type Files = Record<string, Buffer>;

function manifestFor(files: Files): string {
  const artifacts = Object.entries(files).map(([path, b]) => ({
    kind: path.endsWith(".png") ? "screenshot" : "capture_envelopes",
    path,
    mimeType: "application/octet-stream",
    status: "complete",
    bytes: b.length,
    sha256: sha(b),
    startedAt: t0,
    finishedAt: t0,
    durationMs: 1,
    commandId: null,
    taskId: null,
  }));
  return JSON.stringify({ schemaVersion: 1, evidenceId, kind: "still", status: "complete", artifacts, errors: [] });
}

/** What the coordinator sends: each file's header then its chunks, the manifest last; `breakAfter` cuts the stream. */
async function* stream(files: Files, opts: { breakAfter?: number; failFirst?: ConnectError } = {}): AsyncGenerator<PullEvidenceResponse> {
  if (opts.failFirst) throw opts.failFirst;
  let sent = 0;
  for (const [path, bytes] of Object.entries(files)) {
    yield create(PullEvidenceResponseSchema, { kind: { case: "file", value: { path, size: BigInt(bytes.length), sha256: sha(bytes) } } });
    for (let i = 0; i < bytes.length; i += 16 * 1024) {
      if (opts.breakAfter !== undefined && sent >= opts.breakAfter) throw new ConnectError("peer went away", Code.Unavailable);
      const chunk = bytes.subarray(i, i + 16 * 1024);
      sent += chunk.length;
      yield create(PullEvidenceResponseSchema, { kind: { case: "chunk", value: chunk } });
    }
  }
  yield create(PullEvidenceResponseSchema, { kind: { case: "manifestJson", value: manifestFor(files) } });
}

async function failure(p: Promise<unknown>): Promise<ReturnType<typeof toErrorReport>> {
  try {
    await p;
  } catch (err) {
    return toErrorReport(err);
  }
  throw new Error("expected the write to fail");
}

const small: Files = { "captures.json": Buffer.from("{\"captures\":{}}\n") };

describe("writePulledBundle", () => {
  it("creates the directory only once the coordinator answers, private, with every file and the manifest", async () => {
    const dir = join(root, "ok");
    const files = { ...small, "screenshot.png": randomBytes(40_000) };
    const m = await writePulledBundle({ dir, evidenceId, claim: true }, stream(files));
    expect(m.evidenceId).toBe(evidenceId);
    expect((await readdir(dir)).sort()).toEqual(["captures.json", "manifest.json", "screenshot.png"]);
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
    for (const n of await readdir(dir)) expect((await stat(join(dir, n))).mode & 0o777).toBe(0o600);
    expect((await readFile(join(dir, "screenshot.png"))).equals(files["screenshot.png"] as Buffer)).toBe(true);
  });

  it("creates nothing when the first answer is an error (unknown id)", async () => {
    const dir = join(root, "unknown");
    const err = await failure(writePulledBundle({ dir, evidenceId, claim: true }, stream(small, { failFirst: new ConnectError("no such bundle", Code.NotFound) })));
    expect(err.message).toMatch(/no such bundle/);
    await expect(stat(dir)).rejects.toThrow(/ENOENT/);
  });

  it("never leaves a cut file under its final name when the stream breaks", async () => {
    const dir = join(root, "cut");
    const files = { ...small, "screenshot.png": randomBytes(100_000) };
    const err = await failure(writePulledBundle({ dir, evidenceId, claim: true }, stream(files, { breakAfter: 50_000 })));
    // The stream's own failure is reported as it is, not relabelled.
    expect(err).toMatchObject({ code: "COORDINATOR_UNAVAILABLE", message: "peer went away" });
    // The intact file stays (the contract keeps what was written); the cut one and the manifest do not exist.
    expect(await readdir(dir)).toEqual(["captures.json"]);
  });

  it("turns a full disk into EVIDENCE_CAPTURE_FAILED naming the evidence, leaving no empty or truncated file", async (ctx) => {
    if (!tiny) ctx.skip(tinyWhyNot);
    const dir = join(tiny as string, "full");
    // Larger than the whole filesystem: the write comes up short, then ENOSPC.
    const files = { ...small, "screenshot.png": randomBytes(100_000) };
    const err = await failure(writePulledBundle({ dir, evidenceId, claim: true }, stream(files)));
    expect(err.code).toBe("EVIDENCE_CAPTURE_FAILED");
    expect(err.message).toContain(evidenceId);
    const left = await readdir(dir);
    expect(left).toEqual(["captures.json"]);
    expect((await readFile(join(dir, "captures.json"))).equals(small["captures.json"] as Buffer)).toBe(true);
    await rm(dir, { recursive: true });
  });

  it("turns a manifest that does not fit into EVIDENCE_CAPTURE_FAILED, with no manifest.json at all", async (ctx) => {
    if (!tiny) ctx.skip(tinyWhyNot);
    const dir = join(tiny as string, "nearly");
    // Fills the filesystem to the last few bytes with files that do fit.
    const files: Files = { ...small };
    for (let i = 0; i < 15; i++) files[`part${i}.bin`] = randomBytes(4096);
    const fill = await failure(writePulledBundle({ dir, evidenceId, claim: true }, stream(files)));
    expect(fill.code).toBe("EVIDENCE_CAPTURE_FAILED");
    expect(fill.message).toContain(evidenceId);
    const left = await readdir(dir);
    expect(left).not.toContain("manifest.json");
    for (const n of left) {
      // Every name present holds exactly the bytes sent for it.
      expect(n, `leftover ${n}`).toMatch(/^(captures\.json|part\d+\.bin)$/);
      expect((await readFile(join(dir, n))).equals(files[n] as Buffer), n).toBe(true);
    }
    await rm(dir, { recursive: true });
  });
});

describe("writeAll", () => {
  /** A file that accepts at most `per` bytes a write and `room` bytes in all, like a disk filling up. */
  function fakeFile(per: number, room: number): { fh: FileHandle; got: number[] } {
    const got: number[] = [];
    const fh = {
      write: async (b: Uint8Array, off: number, len: number) => {
        const n = Math.max(0, Math.min(per, len, room - got.length));
        got.push(...b.subarray(off, off + n));
        return { bytesWritten: n, buffer: b };
      },
    } as unknown as FileHandle;
    return { fh, got };
  }

  it("continues after short writes until every byte is written", async () => {
    const bytes = randomBytes(10);
    const f = fakeFile(3, 100);
    await writeAll(f.fh, bytes);
    expect(Buffer.from(f.got).equals(bytes)).toBe(true);
  });

  it("throws when the file stops taking bytes, saying how many were written", async () => {
    const f = fakeFile(3, 7);
    await expect(writeAll(f.fh, randomBytes(10), "x.png")).rejects.toThrow(ShortWriteError);
    await expect(writeAll(fakeFile(3, 7).fh, randomBytes(10), "x.png")).rejects.toMatchObject({ code: "ESHORTWRITE", written: 7, wanted: 10 });
  });
});
