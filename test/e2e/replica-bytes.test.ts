/**
 * Files across coordinator replicas with nothing shared but PostgreSQL:
 * each replica has its own data dir, and the bytes of blobs, evidence and
 * session screenshots live in the database (the default there). Whatever
 * replica a file arrived through, any other serves it.
 */
import { createHash } from "node:crypto";
import { readFile, readdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildSimApk, type SimDevice } from "../devsim/index.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startReplicaLab, type ReplicaLab } from "../support/replica-lab.js";
import type { TempDir } from "../support/temp-dir.js";

let lab: ReplicaLab | undefined;
let dir: TempDir;
let phone: SimDevice | undefined;
let serial = "";
/** Admin CLI environment per replica. */
let envs: NodeJS.ProcessEnv[] = [];

const urlOf = (i: number) => lab?.urlOf(i) ?? "";
const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

async function ok(args: string[], env: NodeJS.ProcessEnv): Promise<Record<string, unknown>> {
  const r = await farm(args, env);
  expect(r.code, `farm ${args.join(" ")}: ${r.stdout}${r.stderr}`).toBe(0);
  return r.json;
}

beforeAll(async () => {
  // Each replica its own data dir: no shared mount. The agent attaches to replica 0; every call below goes through replica 1.
  lab = await startReplicaLab("replica-bytes", { serialno: "RBYTES01" });
  ({ dir, phone, serial, envs } = lab);
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

describe("files across replicas, bytes in PostgreSQL", () => {
  it("installs an APK uploaded through the replica the agent is not on, and serves a capture through either replica", async () => {
    const lease = await ok(["lease", "acquire", "--device", serial], envs[1]!);
    const env = { ...envs[1], FARM_LEASE: (lease["lease"] as { token: string }).token, FARM_DEVICE: serial };
    try {
      const apk = join(dir.path, "app.apk");
      await writeFile(apk, buildSimApk({ name: "com.example.across", versionCode: 7, versionName: "7.0" }));
      // Uploaded to replica 1; the agent fetches it from replica 0.
      const installed = await ok(["install", apk], env);
      expect(installed).toMatchObject({ ok: true, dispatched: true });
      expect(String(installed["output"])).toMatch(/^Success/);
      expect(String((await ok(["shell", "--", "pm", "path", "com.example.across"], env))["stdout"])).toContain("package:");

      // The agent uploads the bundle to replica 0; the CLI on replica 1 pulls it from there.
      const out = join(dir.path, "capture");
      const captured = await ok(["evidence", "capture", "--device", serial, "--output-dir", out], env);
      const id = String(captured["evidenceId"]);
      expect((await farm(["evidence", "verify", out], env)).code).toBe(0);
      const pulled = join(dir.path, "pulled");
      await ok(["evidence", "pull", id, "--output-dir", pulled], envs[0]!);
      expect((await farm(["evidence", "verify", pulled], envs[0])).code).toBe(0);
      const png = await readFile(join(pulled, "screenshot.png"));
      expect(png.subarray(1, 4).toString()).toBe("PNG");

      // The dashboard's file route on replica 1, a byte range across the bundle's file.
      const res = await fetch(`${urlOf(1)}/dashboard/files/evidence/${id}/screenshot.png`, { headers: { authorization: `Bearer ${String(envs[1]!.FARM_TOKEN)}`, range: "bytes=4-99" } });
      expect(res.status).toBe(206);
      expect(res.headers.get("content-range")).toBe(`bytes 4-99/${png.length}`);
      expect(Buffer.from(await res.arrayBuffer()).equals(png.subarray(4, 100))).toBe(true);
    } finally {
      await ok(["lease", "release"], env);
    }
  });

  it("records a video through replica 1 and serves the stored bundle, verified, through replica 0", async () => {
    const lease = await ok(["lease", "acquire", "--device", serial], envs[1]!);
    const env = { ...envs[1], FARM_LEASE: (lease["lease"] as { token: string }).token, FARM_DEVICE: serial };
    // A screen that changes, so the recording has frames.
    const ticker = setInterval(() => phone?.state.screen.changed(), 50);
    try {
      const started = await ok(["evidence", "video", "start", "--device", serial, "--duration-seconds", "30", "--size", "216x480"], env);
      const id = String(started["sessionId"]);
      await waitFor("the recording running on replica 1", async () => ((await farm(["evidence", "video", "status", "--session", id], env)).json["status"] === "recording" ? true : undefined));
      await new Promise((r) => setTimeout(r, 1_500));
      expect(await ok(["evidence", "video", "stop", "--session", id], env)).toMatchObject({ ok: true, status: "complete" });
      await waitFor("the video bundle stored", async () => (((await farm(["evidence", "list"], envs[0])).json["bundles"] ?? []) as { evidenceId: string }[]).some((b) => b.evidenceId === id) ? true : undefined);
      const pulled = join(dir.path, "video");
      await ok(["evidence", "pull", id, "--output-dir", pulled], envs[0]!);
      expect((await farm(["evidence", "verify", pulled], envs[0])).code).toBe(0);
      const video = await readFile(join(pulled, "video.mp4"));
      expect(video.subarray(4, 8).toString()).toBe("ftyp");
    } finally {
      clearInterval(ticker);
      await ok(["lease", "release"], env);
    }
  });

  it("keeps a recorded step's screenshots, taken through replica 1, where replica 0 exports them", async () => {
    const lease = await ok(["lease", "acquire", "--device", serial], envs[1]!);
    const token = (lease["lease"] as { token: string }).token;
    const started = await ok(["session", "start", "--device", serial, "--name", "across"], { ...envs[1], FARM_LEASE: token });
    const sessionId = (started["session"] as { sessionId: string }).sessionId;
    const env = { ...envs[1], FARM_LEASE: token, FARM_DEVICE: serial, FARM_SESSION: sessionId };
    await ok(["input", "tap", "10", "20"], env);
    const steps = (await ok(["session", "show", sessionId, "--output", "json"], envs[0]!))["steps"] as { before?: { sha256?: string }; after?: { sha256?: string } }[];
    const shas = [steps[0]?.before?.sha256, steps[0]?.after?.sha256];
    for (const s of shas) expect(s).toMatch(/^[0-9a-f]{64}$/);
    const exported = join(dir.path, "export");
    await ok(["session", "export", sessionId, exported], envs[0]!);
    const files = await readdir(exported, { recursive: true });
    for (const s of shas) {
      const name = files.find((f) => f.includes(s as string));
      expect(name, `${s} among ${files.join(", ")}`).toBeDefined();
      expect(sha256(await readFile(join(exported, name as string)))).toBe(s);
    }
    await ok(["session", "end"], env);
    await ok(["lease", "release"], env);
  });
});
