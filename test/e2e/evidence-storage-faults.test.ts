/**
 * Storage failures are evidence failures: the coordinator's evidence store
 * and the agent's staging dir each on a tiny tmpfs (we run as root), with
 * coordinator and agent as separate processes. A full disk gives
 * EVIDENCE_CAPTURE_FAILED naming the evidence id (never INTERNAL), leaves no
 * empty or truncated file under a final name, and loses nothing already
 * staged: once space is back, the staged bundle reaches the store.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync } from "node:fs";
import { mkdir, readdir, readFile, rm, stat, statfs, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { adbConnect, SimDevice } from "../devsim/index.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";

interface Manifest {
  evidenceId: string;
  status: string;
  artifacts: { kind: string; path: string | null; status: string; bytes: number | null; sha256: string | null; error?: { code: string } }[];
  errors: { code: string; stage: string }[];
}

let lab: SplitFarm | undefined;
let phone: SimDevice | undefined;
let serial: string;
const mounts: string[] = [];

const staging = () => join(lab!.dir.path, "agent", "staging");
const store = () => join(lab!.dir.path, "coordinator", "evidence");
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;

function mountTmpfs(dir: string, size: string): void {
  mkdirSync(dir, { recursive: true });
  execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size},mode=0700`, "tmpfs", dir]);
  mounts.push(dir);
}

/** Fills a filesystem until at most `leaveBytes` are free; returns the filler's path. */
async function fill(dir: string, leaveBytes: number): Promise<string> {
  const filler = join(dir, ".filler");
  const s = await statfs(dir);
  const free = s.bavail * s.bsize;
  await writeFile(filler, Buffer.alloc(Math.max(0, free - leaveBytes)));
  return filler;
}

/** Every file under a final name in a bundle dir is whole: what its manifest says, or a decodable document. */
async function expectNoTruncatedFiles(dir: string): Promise<void> {
  const names = await readdir(dir).catch(() => [] as string[]);
  for (const name of names) {
    expect(name, `${dir}/${name}`).not.toMatch(/\.tmp|\.part$/);
    expect((await stat(join(dir, name))).size, `${dir}/${name}`).toBeGreaterThan(0);
  }
  if (!names.includes("manifest.json")) return;
  const m = JSON.parse(await readFile(join(dir, "manifest.json"), "utf8")) as Manifest;
  for (const a of m.artifacts) {
    if (a.path === null) continue;
    const bytes = await readFile(join(dir, a.path));
    expect(bytes.length, a.path).toBe(a.bytes);
    expect(createHash("sha256").update(bytes).digest("hex"), a.path).toBe(a.sha256);
  }
  for (const name of names) if (name !== "manifest.json") expect(m.artifacts.map((a) => a.path), name).toContain(name);
}

const storedIds = async () => (((await farm(["evidence", "list"], lab!.env)).json["bundles"] ?? []) as { evidenceId: string }[]).map((b) => b.evidenceId);

beforeAll(async () => {
  lab = await startSplitFarm("evidence-storage", {
    // The agent stages onto a tiny filesystem from its first capture on.
    beforeAgent: async (d) => mountTmpfs(join(d.path, "agent", "staging"), "1m"),
  });
  // The coordinator's store too (it made the directory at start; the mount covers it).
  mountTmpfs(store(), "1m");
  phone = new SimDevice({ serialno: "DISKFULL01" });
  serial = await adbConnect(lab.adb.port, "127.0.0.1", await phone.listen());
  await waitFor(
    "the phone",
    async () => ((((await farm(["devices"], lab!.env)).json["devices"] ?? []) as { serial: string; state: string; properties: { physicalId: string } }[]).some((d) => d.serial === serial && d.state === "device" && d.properties.physicalId)
      ? true
      : undefined),
  );
});

afterAll(async () => {
  try {
    await lab?.agent.stop();
    await lab?.coordinator.stop();
  } finally {
    // Always unmount, even when a test failed half-way.
    for (const m of mounts.reverse()) {
      try {
        execFileSync("umount", ["-l", m]);
      } catch {
        // Not mounted (any more).
      }
    }
    await phone?.close();
    await lab?.stop();
  }
});

describe("a full coordinator evidence store", () => {
  it("fails the capture with EVIDENCE_CAPTURE_FAILED and the evidence id, publishes nothing, and uploads the staged bundle once space is back", async () => {
    await mkdir(join(store(), ".incoming"), { recursive: true });
    const filler = await fill(store(), 8 * 1024);
    const r = await farm(["evidence", "capture", "--device", serial], lab!.env);
    expect(r.code).toBe(69);
    expect(r.json).toMatchObject({ ok: false, code: "EVIDENCE_CAPTURE_FAILED" });
    const id = UUID.exec(String(r.json["message"]))?.[0];
    expect(id, String(r.json["message"])).toBeDefined();
    // Nothing under a final name in the store, nothing half-received left behind.
    expect(await readdir(store())).not.toContain(id);
    expect(await readdir(join(store(), ".incoming"))).toEqual([]);
    expect(await storedIds()).not.toContain(id);
    // The agent keeps the whole bundle it staged.
    const staged = join(staging(), id!);
    expect(await readdir(staged)).toContain("manifest.json");
    await expectNoTruncatedFiles(staged);

    await rm(filler);
    await waitFor("the staged bundle in the store", async () => ((await storedIds()).includes(id!) ? true : undefined), { timeoutMs: 45_000, intervalMs: 500 });
    await waitFor("the staged copy removed", async () => ((await readdir(staging())).includes(id!) ? undefined : true));
    const pulled = join(lab!.dir.path, "pulled");
    expect((await farm(["evidence", "pull", id!, "--output-dir", pulled], lab!.env)).json).toMatchObject({ ok: true, status: "complete" });
    expect((await farm(["evidence", "verify", pulled], lab!.env)).code).toBe(0);
  });
});

describe("a full agent staging dir", () => {
  it("fails with EVIDENCE_CAPTURE_FAILED and the evidence id when nothing fits, leaving no file under a final name", async () => {
    const filler = await fill(staging(), 0);
    try {
      const r = await farm(["evidence", "capture", "--device", serial], lab!.env);
      expect(r.code).toBe(69);
      expect(r.json).toMatchObject({ ok: false, code: "EVIDENCE_CAPTURE_FAILED" });
      // No manifest could be staged, so no bundle exists anywhere: the message names the id.
      const id = UUID.exec(String(r.json["message"]))?.[0];
      expect(id, String(r.json["message"])).toBeDefined();
      expect(await readdir(join(staging(), id!))).toEqual([]);
      expect(await storedIds()).not.toContain(id);
    } finally {
      await rm(filler);
    }
  });

  it("stores what fitted when the screenshot does not, as a partial bundle naming the storage failure", async () => {
    // Room for the small files, not for a whole screenshot.
    const filler = await fill(staging(), 16 * 1024);
    try {
      const r = await farm(["evidence", "capture", "--device", serial], lab!.env);
      expect(r.code).toBe(69);
      expect(r.json).toMatchObject({ ok: false, code: "EVIDENCE_CAPTURE_FAILED" });
      expect(r.json).toMatchObject({ status: "partial", errors: [expect.objectContaining({ code: "EVIDENCE_STORAGE_FAILED", stage: "persist" })] });
      const id = String(r.json["evidenceId"]);
      // Stored as what it is: the screenshot failed on storage, the rest is whole.
      expect(await storedIds()).toContain(id);
      const pulled = join(lab!.dir.path, "pulled-partial");
      expect((await farm(["evidence", "pull", id, "--output-dir", pulled], lab!.env)).json).toMatchObject({ ok: true, status: "partial" });
      const m = JSON.parse(await readFile(join(pulled, "manifest.json"), "utf8")) as Manifest;
      expect(m.artifacts.find((a) => a.kind === "screenshot")).toMatchObject({ path: null, status: "failed", bytes: null, error: { code: "EVIDENCE_STORAGE_FAILED" } });
      expect(m.artifacts.find((a) => a.kind === "hierarchy")).toMatchObject({ path: "hierarchy.xml", status: "complete" });
      expect(await readdir(pulled)).not.toContain("screenshot.png");
      expect((await farm(["evidence", "verify", pulled], lab!.env)).code).toBe(0);
    } finally {
      await rm(filler);
    }
  });
});
