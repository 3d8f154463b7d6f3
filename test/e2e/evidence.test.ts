/**
 * `farm evidence capture|list|pull|verify` end to end: real adb server,
 * simulated phones (with faults), `farm standalone`, the CLI.
 */
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, readdir, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimDevice } from "../devsim/index.js";
import { farm } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

let lab: Lab;
let phone: { device: SimDevice; serial: string };

interface Manifest {
  evidenceId: string;
  status: string;
  label: string | null;
  context: Record<string, unknown>;
  device: Record<string, unknown> & { display: { width: number; height: number } | null };
  artifacts: { kind: string; path: string | null; status: string; bytes: number | null; sha256: string | null; error?: { code: string } }[];
  errors: { code: string; stage: string }[];
}

const out = (name: string) => join(lab.dir.path, "out", name);
const manifestOf = async (dir: string) => JSON.parse(await readFile(join(dir, "manifest.json"), "utf8")) as Manifest;
const capture = (args: string[]) => farm(["evidence", "capture", "--device", phone.serial, ...args], lab.env);

beforeAll(async () => {
  lab = await startLab("evidence");
  await mkdir(join(lab.dir.path, "out"));
  phone = await lab.addDevice({ serialno: "EVIDENCE01" });
});

afterAll(async () => {
  await lab?.stop();
});

describe("farm evidence capture", () => {
  it("writes a complete, verified bundle into a new directory", async () => {
    const dir = out("complete");
    const r = await capture(["--output-dir", dir, "--label", "Settings observation", "--context-json", "{\"commandId\":\"c-1\",\"originalVerdict\":\"failed\"}"]);
    expect(r.code).toBe(0);
    expect(r.json).toMatchObject({ ok: true, status: "complete", manifestPath: join(dir, "manifest.json") });
    expect((await stat(dir)).mode & 0o777).toBe(0o700);
    const names = (await readdir(dir)).sort();
    expect(names).toEqual(["captures.json", "hierarchy.xml", "manifest.json", "screenshot.png"]);
    for (const n of names) expect((await stat(join(dir, n))).mode & 0o777).toBe(0o600);

    const m = await manifestOf(dir);
    expect(m).toMatchObject({ evidenceId: r.json["evidenceId"], status: "complete", label: "Settings observation", errors: [] });
    // The caller's verdict is theirs: a complete capture never touches it.
    expect(m.context).toEqual({ commandId: "c-1", originalVerdict: "failed" });
    expect(m.device).toMatchObject({ serial: phone.serial, model: phone.device.model, apiLevel: Number(phone.device.props["ro.build.version.sdk"]), bootId: phone.device.bootId, hierarchySource: "uiautomator" });
    const display = m.device.display;
    expect(display).not.toBeNull();
    const png = await sharp(join(dir, "screenshot.png")).metadata();
    expect([png.width, png.height]).toEqual([display?.width, display?.height]);
    const xml = await readFile(join(dir, "hierarchy.xml"), "utf8");
    expect(xml).toMatch(/^<\?xml[\s\S]*<hierarchy[\s\S]*<\/hierarchy>\s*$/);
    const captures = JSON.parse(await readFile(join(dir, "captures.json"), "utf8")) as { captures: { screenshot: { source: string } } };
    expect(captures.captures.screenshot.source).toBe("adb_screencap");
    expect(await readFile(join(dir, "captures.json"), "utf8")).not.toMatch(/base64|iVBORw0KGgo/);

    const v = await farm(["evidence", "verify", dir], lab.env);
    expect(v.json).toMatchObject({ ok: true, checked: 3 });
  });

  it("keeps a managed bundle on the coordinator that can be listed and pulled", async () => {
    const r = await capture(["--label", ""]);
    expect(r.json).toMatchObject({ ok: true, status: "complete", manifestPath: null });
    const id = String(r.json["evidenceId"]);
    const list = await farm(["evidence", "list", "--device", phone.serial], lab.env);
    const bundles = list.json["bundles"] as { evidenceId: string; label: string | null; status: string }[];
    expect(bundles.find((b) => b.evidenceId === id)).toMatchObject({ label: "", status: "complete" });
    const dir = out("pulled");
    const pulled = await farm(["evidence", "pull", id, "--output-dir", dir], lab.env);
    expect(pulled.json).toMatchObject({ ok: true, status: "complete" });
    expect((await manifestOf(dir)).label).toBe("");
    expect((await farm(["evidence", "verify", dir], lab.env)).code).toBe(0);
    const missing = await farm(["evidence", "pull", "00000000-0000-4000-8000-000000000000", "--output-dir", out("nope")], lab.env);
    expect(missing.json).toMatchObject({ ok: false, code: "EVIDENCE_NOT_FOUND" });
  });

  it("records a missing label as null", async () => {
    const dir = out("nolabel");
    expect((await capture(["--output-dir", dir])).code).toBe(0);
    expect((await manifestOf(dir)).label).toBeNull();
  });

  it("counts label length in UTF-16 code units", async () => {
    const astral = "\u{1F600}"; // two UTF-16 code units
    const atLimit = await capture(["--output-dir", out("astral-ok"), "--label", astral.repeat(1024)]);
    expect(atLimit.json).toMatchObject({ ok: true });
    expect((await manifestOf(out("astral-ok"))).label).toBe(astral.repeat(1024));
    const over = await capture(["--output-dir", out("astral-over"), "--label", astral.repeat(1024) + "x"]);
    expect(over.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "label" });
    await expect(stat(out("astral-over"))).rejects.toThrow();
  });

  // The argument matrix is test/contract/evidence-capture-refusals.test.ts; this is its smoke through the real processes.
  it("refuses a bad argument before touching the device or the disk", async () => {
    const before = ((await farm(["evidence", "list"], lab.env)).json["bundles"] as unknown[]).length;
    await mkdir(out("exists"));
    const r = await capture(["--output-dir", out("exists")]);
    expect(r.code).toBe(73);
    expect(r.json).toMatchObject({ ok: false, code: "EVIDENCE_OUTPUT_EXISTS", field: "output-dir", dispatched: false, ambiguous: false });
    expect(await readdir(out("exists"))).toEqual([]);
    const after = ((await farm(["evidence", "list"], lab.env)).json["bundles"] as unknown[]).length;
    expect(after).toBe(before);
  });

  it("with --app-package for an app without an SDK, keeps the screenshot and says why there is no hierarchy", async () => {
    const r = await capture(["--output-dir", out("sdk"), "--app-package", "com.example.app"]);
    expect(r.json).toMatchObject({ ok: false, code: "EVIDENCE_CAPTURE_FAILED", status: "partial" });
    const m = JSON.parse(await readFile(join(out("sdk"), "manifest.json"), "utf8")) as { device: { hierarchySource: string; appPackage: string }; errors: { code: string; stage: string }[] };
    expect(m.device).toMatchObject({ hierarchySource: "app-sdk", appPackage: "com.example.app" });
    expect(m.errors).toContainEqual(expect.objectContaining({ stage: "hierarchy", code: "bridge_endpoint_discovery_failed" }));
  });

  it("lets exactly one of two racing captures have a directory", async () => {
    const dir = out("race");
    const [a, b] = await Promise.all([capture(["--output-dir", dir]), capture(["--output-dir", dir])]);
    const results = [a, b].map((r) => r.json["ok"] === true ? "won" : String(r.json["code"])).sort();
    expect(results).toEqual(["EVIDENCE_OUTPUT_EXISTS", "won"]);
    expect((await farm(["evidence", "verify", dir], lab.env)).code).toBe(0);
  });

  it("reports a parent it cannot write to", async () => {
    // /proc refuses new directories even to root.
    const r = await capture(["--output-dir", "/proc/farm-evidence-test"]);
    expect(r.code).toBe(64);
    expect(r.json).toMatchObject({ ok: false, field: "output-dir" });
  });
});

describe("captures that cannot be complete", () => {
  for (const png of ["corrupt", "truncated", "lying-header"] as const) {
    it(`never calls a ${png} PNG complete, and keeps its bytes as a partial artifact`, async () => {
      phone.device.faults.set({ png });
      try {
        const dir = out(`png-${png}`);
        const r = await capture(["--output-dir", dir]);
        expect(r.code).toBe(69);
        expect(r.json).toMatchObject({ ok: false, code: "EVIDENCE_CAPTURE_FAILED", status: "partial" });
        const m = await manifestOf(dir);
        const shot = m.artifacts.find((a) => a.kind === "screenshot");
        expect(shot).toMatchObject({ status: "partial", path: "screenshot.partial.png" });
        // A PNG that arrived whole but does not decode: not a transfer or size failure.
        expect(shot?.error?.code).toBe("SCREENSHOT_INVALID_PNG");
        expect(m.artifacts.find((a) => a.kind === "hierarchy")?.status).toBe("complete");
        expect((await farm(["evidence", "verify", dir], lab.env)).code).toBe(0);
      } finally {
        phone.device.faults.set({ png: null });
      }
    });
  }

  it("records a locked screen as a hierarchy failure without waking or unlocking", async () => {
    phone.device.state.display.locked = true;
    try {
      const dir = out("locked");
      const r = await capture(["--output-dir", dir]);
      expect(r.json).toMatchObject({ ok: false, code: "EVIDENCE_CAPTURE_FAILED", status: "partial" });
      const m = await manifestOf(dir);
      expect(m.artifacts.find((a) => a.kind === "hierarchy")).toMatchObject({ status: "failed", path: null, error: { code: "DEVICE_LOCKED" } });
      expect(m.artifacts.find((a) => a.kind === "screenshot")?.status).toBe("complete");
      expect(phone.device.state.display.locked).toBe(true);
    } finally {
      phone.device.state.display.locked = false;
    }
  });

  it("stops at the budget when the device hangs, and does not start the hierarchy", async () => {
    // Screenshots and dumps are read over the shell (v2), so hang both shell and exec.
    phone.device.faults.set({ hangServices: ["exec:", "shell"] });
    try {
      const dir = out("hang");
      const t0 = Date.now();
      const r = await capture(["--output-dir", dir, "--timeout", "2000"]);
      expect(Date.now() - t0).toBeLessThan(20_000);
      expect(r.json).toMatchObject({ ok: false, code: "EVIDENCE_CAPTURE_FAILED", status: "failed" });
      const m = await manifestOf(dir);
      expect(m.artifacts.find((a) => a.kind === "screenshot")).toMatchObject({ status: "failed", error: { code: "COMMAND_TIMEOUT" } });
      expect(m.artifacts.find((a) => a.kind === "hierarchy")).toMatchObject({ status: "failed", error: { code: "COMMAND_TIMEOUT" } });
    } finally {
      phone.device.faults.set({ hangServices: null });
    }
  });

  it("keeps partial screenshot bytes when the phone vanishes mid-transfer", async () => {
    // The phone vanishes once it has sent the first PNG packets (4 KiB each,
    // each sent only after the host took the last), not after a guessed delay.
    let screencapStream: string | undefined;
    let packetsSent = 0;
    let midTransfer: () => void = () => undefined;
    const sentSome = new Promise<void>((resolve) => (midTransfer = resolve));
    const trace = (line: string) => {
      const open = /^<- OPEN\((\d+), \d+\) ".*screencap/.exec(line);
      if (open) screencapStream = open[1];
      const wrte = /^-> WRTE\(\d+, (\d+)\)/.exec(line);
      if (wrte && wrte[1] === screencapStream && ++packetsSent === 3) midTransfer();
    };
    const flaky = await lab.addDevice({ serialno: "VANISH0001", maxPayload: 4096, trace });
    flaky.device.faults.set({ bandwidthBytesPerSec: 40_000 });
    const dir = out("vanish");
    const pending = farm(["evidence", "capture", "--device", flaky.serial, "--output-dir", dir, "--timeout", "20000"], lab.env);
    await sentSome;
    await flaky.device.vanish();
    const r = await pending;
    expect(r.code).toBe(69);
    const m = await manifestOf(dir);
    expect(m.status).not.toBe("complete");
    const shot = m.artifacts.find((a) => a.kind === "screenshot");
    expect(shot).toMatchObject({ status: "partial", path: "screenshot.partial.png" });
    // The bytes that arrived are kept as they arrived: at least the packets the host took, and not a PNG that decodes.
    const bytes = await readFile(join(dir, "screenshot.partial.png"));
    expect(bytes.length).toBe(shot?.bytes);
    // Two packets the host acknowledged, each 4096 bytes less shell v2's 5-byte frame header.
    expect(bytes.length).toBeGreaterThanOrEqual(2 * (4096 - 5));
    expect(bytes.subarray(1, 4).toString("latin1")).toBe("PNG");
    await expect(sharp(bytes).raw().toBuffer()).rejects.toThrow();
    expect((await farm(["evidence", "verify", dir], lab.env)).code).toBe(0);
  });
});

describe("farm evidence verify", () => {
  it("catches a flipped byte, a missing file and an edited manifest", async () => {
    const dir = out("tamper");
    expect((await capture(["--output-dir", dir])).code).toBe(0);
    const shot = join(dir, "screenshot.png");
    const bytes = await readFile(shot);
    bytes[bytes.length >> 1] = (bytes[bytes.length >> 1] as number) ^ 0x01;
    await chmod(shot, 0o600);
    await writeFile(shot, bytes);
    const flipped = await farm(["evidence", "verify", dir], lab.env);
    expect(flipped.code).toBe(65);
    expect(flipped.json).toMatchObject({ ok: false, code: "EVIDENCE_VERIFY_FAILED" });
    expect(String((flipped.json["problems"] as string[])[0])).toContain("screenshot.png: sha256");

    const dir2 = out("tamper2");
    expect((await capture(["--output-dir", dir2])).code).toBe(0);
    await import("node:fs/promises").then((fs) => fs.rm(join(dir2, "hierarchy.xml")));
    const missing = await farm(["evidence", "verify", dir2], lab.env);
    expect(missing.json["problems"]).toEqual(["hierarchy.xml: missing"]);

    const dir3 = out("tamper3");
    expect((await capture(["--output-dir", dir3])).code).toBe(0);
    const m = await manifestOf(dir3);
    m.status = "compleat";
    await writeFile(join(dir3, "manifest.json"), JSON.stringify(m));
    const edited = await farm(["evidence", "verify", dir3], lab.env);
    expect(edited.code).toBe(65);
    const m2 = await manifestOf(dir2);
    (m2.artifacts[0] as { bytes: number }).bytes += 1;
    await writeFile(join(dir2, "manifest.json"), JSON.stringify(m2));
    expect((await farm(["evidence", "verify", dir2], lab.env)).code).toBe(65);
  });
});

describe("failures in flight", () => {
  it("never writes a manifest when the coordinator dies mid-capture", async () => {
    const slow = await lab.addDevice({ serialno: "SLOWLINK01" });
    slow.device.faults.set({ bandwidthBytesPerSec: 50_000 });
    const dir = out("coordinator-killed");
    const pending = farm(["evidence", "capture", "--device", slow.serial, "--output-dir", dir, "--timeout", "30000"], lab.env);
    await new Promise((r) => setTimeout(r, 1_500));
    lab.standalone.kill("SIGKILL");
    await lab.standalone.exited;
    const r = await pending;
    expect(r.code).toBe(69);
    expect(r.json["ok"]).toBe(false);
    // The capture never came back, so the output dir was never claimed.
    expect(existsSync(dir)).toBe(false);
    await lab.restart();
  });
});
