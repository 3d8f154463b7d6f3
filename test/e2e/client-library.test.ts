/**
 * @farm/client as a Node test harness uses it, against a real lab: `farm
 * standalone` as its own process, a real adb server, a simulated phone.
 * The harness connects the way the CLI does (here: the standalone's files
 * under FARM_HOME), leases with `await using`, drives the phone, records a
 * session that `farm session show` then lists, and the lease goes back when
 * the scope ends, also when the test body throws.
 */
import { createHash } from "node:crypto";
import { existsSync, statSync } from "node:fs";
import { readFile, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, FarmError, exitCodeFor, type FarmClient } from "@farm/client";
import { buildSimApk, ROOT, runAdb, startAdbServer, type AdbServer, type SimDevice } from "../devsim/index.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";
import { startTcpBalancer } from "../support/tcp-balancer.js";

let lab: Lab;
let serial: string;
let phone: SimDevice;
let user: AdbServer | undefined;

beforeAll(async () => {
  lab = await startLab("client-library");
  ({ serial, device: phone } = await lab.addDevice({ serialno: "LIB00001" }));
}, 120_000);

afterAll(async () => {
  await user?.stop();
  await lab?.stop();
});

/** The leases the coordinator holds, as `farm lease list` reports them. */
async function leases(): Promise<{ serial: string; leaseId: string }[]> {
  const r = await farm(["lease", "list"], lab.env);
  expect(r.code, r.stdout + r.stderr).toBe(0);
  return r.json["leases"] as { serial: string; leaseId: string }[];
}

async function failure(p: Promise<unknown>): Promise<FarmError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(FarmError);
  return err as FarmError;
}

describe("@farm/client against a real lab", () => {
  it("leases with await using, runs a shell, taps by element, takes a screenshot that decodes, records a session that farm session show lists, and releases at the scope's end", async () => {
    await using client = await connect({ env: lab.env });
    expect(client.connection.coordinatorSource).toBe(join(String(lab.env["FARM_HOME"]), "standalone.json"));
    let leaseId = "";
    let sessionId = "";
    {
      await using lease = await client.acquire({ serial, waitMs: 10_000 });
      leaseId = lease.leaseId;
      expect(await leases()).toEqual([expect.objectContaining({ serial, leaseId })]);

      const props = await lease.device.shell("getprop ro.serialno");
      expect(props).toMatchObject({ exitCode: 0, stdout: "LIB00001\n", dispatched: true, ambiguous: false });
      expect((await lease.device.shell("exit 3")).exitCode).toBe(3);

      const session = await lease.startSession({ name: "client-library", context: { suite: "e2e" } });
      sessionId = session.sessionId;
      const d = session.device;
      await d.key("KEYCODE_HOME");
      await waitFor("the launcher's Settings", async () => ((await d.uiTree()).roots.some(function has(e): boolean {
          return e.text === "Settings" || e.children.some(has);
        }) ?
        true :
        undefined));
      const tapped = await d.tap({ text: "Settings" });
      expect(tapped.element?.element?.text).toBe("Settings");
      expect(tapped.dispatched).toBe(true);

      const shot = await d.screenshot();
      const meta = await sharp(shot.png).metadata();
      expect(meta).toMatchObject({ format: "png", width: shot.width, height: shot.height });
      expect(shot.width).toBeGreaterThan(0);

      const steps = await session.steps();
      expect(steps.map((s) => s.action)).toEqual(expect.arrayContaining(["key", "tap"]));
      await session.end("passed");
    }
    // The scope ended: the coordinator holds no lease, and the session's steps are there for farm session show.
    expect(await leases()).toEqual([]);
    const show = await farm(["session", "show", sessionId], lab.env);
    expect(show.code, show.stdout + show.stderr).toBe(0);
    expect(show.json["session"]).toMatchObject({ sessionId, name: "client-library", status: "passed", leaseId, context: { suite: "e2e" } });
    const shown = (show.json["steps"] as { action: string; result?: { ok?: boolean } }[]).map((s) => s.action);
    expect(shown).toEqual((await client.sessionSteps(sessionId)).map((s) => s.action));
    expect(shown).toEqual(expect.arrayContaining(["key", "tap"]));
  });

  it("releases the lease when the test body throws; the body's error is the one the caller sees", async () => {
    const client = await connect({ env: lab.env });
    try {
      const thrown = new Error("an assertion in the test failed");
      let held = "";
      const body = async () => {
        await using lease = await client.acquire({ serial });
        held = lease.leaseId;
        await lease.device.shell("true");
        throw thrown;
      };
      await expect(body()).rejects.toBe(thrown);
      expect(held).not.toBe("");
      expect(await leases()).toEqual([]);
      // The phone is free again at once: a lease that does not wait gets it.
      await using again = await client.acquire({ serial, waitMs: 0 });
      expect(again.leaseId).not.toBe(held);
    } finally {
      client.close();
    }
  });

  it("a farm failure is a FarmError with the table's code, field and exit code; bad input is refused before it is sent", async () => {
    await using client = await connect({ env: lab.env });
    const none = await failure(client.acquire({ model: "NoSuchPhone", waitMs: 8_000 }));
    expect(none.code).toBe("NO_DEVICE_MATCHES");
    expect(none.exitCode).toBe(exitCodeFor("NO_DEVICE_MATCHES"));
    expect(none.message).toContain("NoSuchPhone");
    // Another's phone without its lease: the coordinator's refusal, as a FarmError.
    const unleased = await failure(client.device(serial).tap(10, 10));
    expect(unleased.code).toBe("LEASE_REQUIRED");
    expect(await failure(client.device(serial).tap(10, -1))).toMatchObject({ code: "INVALID_ARGUMENT", field: "y" });
  });

  it("an aborted call waiting for a busy phone ends CALL_CANCELLED, the agent drops it, and it never runs; the phone's physical id prefix names it", async () => {
    await using client = await connect({ env: lab.env });
    await using lease = await client.acquire({ serial, waitMs: 10_000 });
    const ownership = async () => (await farm(["device", "ownership", "status", "--device", serial], lab.env)).json["ownership"] as { waiting: number };
    // Busy until the test writes lib-busy.go.
    const busy = lease.device.shell("until [ -e /data/local/tmp/lib-busy.go ]; do sleep 0.1; done; echo done", { timeoutMs: 600_000 });
    // Awaited below; handled here too, so a failure above it leaves no unhandled rejection when the client closes.
    busy.catch(() => undefined);
    const free = () => phone.state.fs.writeFile("/data/local/tmp/lib-busy.go", Buffer.from("go\n"), ROOT);
    try {
      await waitFor("the busy job to hold the phone", async () => (JSON.stringify(await ownership()).includes("lib-busy.go") ? true : undefined), { timeoutMs: 30_000 });
      const abort = new AbortController();
      const queued = failure(lease.device.shell("echo ran > /data/local/tmp/lib-cancelled.txt", { timeoutMs: 600_000, signal: abort.signal }));
      await waitFor("the change to wait for the phone", async () => ((await ownership()).waiting === 1 ? true : undefined), { timeoutMs: 30_000 });
      abort.abort();
      expect(await queued).toMatchObject({ code: "CALL_CANCELLED", exitCode: exitCodeFor("CALL_CANCELLED") });
      // The agent was told: no change waits for the phone any more, while it is still busy.
      await waitFor("the agent to drop the cancelled change", async () => ((await ownership()).waiting === 0 ? true : undefined), { timeoutMs: 60_000 });
    } finally {
      // The phone comes free whatever happened above: the tests after this one use it.
      free();
    }
    expect(await busy).toMatchObject({ exitCode: 0, stdout: "done\n" });
    // The same phone by a prefix of its physical id, as farm devices shows it.
    const byId = client.device(`${lease.physicalId.slice(0, 15)}…`, { lease: lease.token });
    expect(await byId.shell("echo after")).toMatchObject({ exitCode: 0, stdout: "after\n" });
    expect(phone.state.fs.exists("/data/local/tmp/lib-cancelled.txt", ROOT)).toBe(false);
  });

  it("installs an APK from a path and from bytes; a broken APK is INSTALL_FAILED with its outcome", async () => {
    await using client = await connect({ env: lab.env });
    await using lease = await client.acquire({ serial });
    const apk = join(lab.dir.path, "lib-app.apk");
    await writeFile(apk, buildSimApk({ name: "com.example.libinstall", versionCode: 7, versionName: "7.0" }));
    const fromFile = await lease.device.install(apk);
    expect(fromFile).toMatchObject({ dispatched: true, ambiguous: false });
    expect(fromFile.output).toMatch(/^Success/);
    expect(fromFile.actionId).not.toBe("");
    expect((await lease.device.shell("pm path com.example.libinstall")).stdout).toContain("package:");
    const fromBytes = await lease.device.install(buildSimApk({ name: "com.example.libbytes", versionCode: 1, versionName: "1" }));
    expect(fromBytes.output).toMatch(/^Success/);
    expect((await lease.device.shell("pm path com.example.libbytes")).stdout).toContain("package:");
    const broken = await failure(lease.device.install(Buffer.from("not an apk")));
    expect(broken).toMatchObject({ code: "INSTALL_FAILED", exitCode: exitCodeFor("INSTALL_FAILED"), outcome: expect.objectContaining({ dispatched: true, ambiguous: false }) });
    // The same failure the CLI gives for the same APK.
    const file = join(lab.dir.path, "lib-broken.apk");
    await writeFile(file, "not an apk");
    const cli = await farm(["install", file], { ...lab.env, FARM_DEVICE: serial, FARM_LEASE: lease.token });
    expect(cli.json).toMatchObject({ ok: false, code: broken.code, dispatched: true, ambiguous: false });
    await expect(lease.device.install(join(lab.dir.path, "no-such.apk"))).rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "file" });
  });

  it("pushes a file and bytes that the phone's cat and sha256sum read back, and pulls them to memory and to a new 0600 file", async () => {
    await using client = await connect({ env: lab.env });
    await using lease = await client.acquire({ serial });
    const d = lease.device;
    const data = Buffer.from(Array.from({ length: 200_000 }, (_, i) => i % 251));
    const sha = createHash("sha256").update(data).digest("hex");
    const local = join(lab.dir.path, "lib-push.bin");
    await writeFile(local, data);
    const pushed = await d.push(local, "/sdcard/Download/lib-push.bin");
    expect(pushed).toMatchObject({ size: data.length, sha256: sha, dispatched: true, ambiguous: false });
    expect((await d.shell("sha256sum /sdcard/Download/lib-push.bin")).stdout).toBe(`${sha}  /sdcard/Download/lib-push.bin\n`);
    await d.push(Buffer.from("hello from bytes\n"), "/sdcard/Download/lib-hello.txt");
    expect((await d.shell("cat /sdcard/Download/lib-hello.txt")).stdout).toBe("hello from bytes\n");

    const pulled = await d.pull("/sdcard/Download/lib-push.bin");
    expect(pulled.sha256).toBe(sha);
    expect(pulled.bytes.equals(data)).toBe(true);
    const out = join(lab.dir.path, "lib-pulled.bin");
    expect(await d.pull("/sdcard/Download/lib-push.bin", out)).toMatchObject({ file: out, size: data.length, sha256: sha });
    expect((await readFile(out)).equals(data)).toBe(true);
    expect(statSync(out).mode & 0o777).toBe(0o600);

    // Refused before anything is sent or read: a path outside the allowed directory, a file already there, a missing file.
    await expect(d.push(local, "/data/local/tmp/x")).rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "path" });
    await expect(d.pull("/sdcard/Download/../x")).rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "path" });
    await expect(d.pull("/sdcard/Download/lib-push.bin", out)).rejects.toMatchObject({ code: "EVIDENCE_OUTPUT_EXISTS", field: "localPath" });
    const none = await failure(d.pull("/sdcard/Download/lib-none.bin"));
    expect(none).toMatchObject({ code: "NOT_FOUND", field: "path" });
    // Past the limit (256 MiB): refused from the file's size, before a byte is read (a sparse file: no bytes to read anyway).
    const huge = join(lab.dir.path, "lib-huge.bin");
    await writeFile(huge, "");
    await truncate(huge, 256 * 1024 * 1024 + 1);
    expect(await failure(d.push(huge, "/sdcard/Download/lib-huge.bin"))).toMatchObject({ code: "FILE_TOO_LARGE", field: "file", exitCode: exitCodeFor("FILE_TOO_LARGE") });
    expect(phone.state.fs.exists("/sdcard/Download/lib-huge.bin", ROOT)).toBe(false);
  });

  it("streams logcat lines as an async iterable: filtered by tag and level, ended by break and by an AbortSignal", async () => {
    await using client = await connect({ env: lab.env });
    await using lease = await client.acquire({ serial });
    const d = lease.device;
    expect(() => d.logcat({ level: "X" as "V" })).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT", field: "level" }));
    // Writes the line again until the stream shows it: the stream may open after a first write (the backlog is only the newest lines).
    const writer = setInterval(() => void d.shell("log -p w -t libtest hello from the library; log -p d -t libtest debug line").catch(() => undefined), 500);
    try {
      let seen: { tag: string; level: string; message: string } | undefined;
      for await (const line of d.logcat({ tag: "libtest", level: "I" })) {
        expect(line.tag).toBe("libtest");
        expect(line.level).not.toBe("D");
        seen = line;
        break;
      }
      expect(seen).toMatchObject({ tag: "libtest", level: "W", message: "hello from the library" });

      const abort = new AbortController();
      let lines = 0;
      for await (const line of d.logcat({ tag: ["libtest", "other"], signal: abort.signal })) {
        expect(line.tag).toBe("libtest");
        if (++lines === 2) abort.abort();
      }
      expect(lines).toBe(2);

      // An abort while the loop waits for a line that never comes ends it quietly too.
      const idle = new AbortController();
      const waiting = d.logcat({ tag: "never-written", signal: idle.signal })[Symbol.asyncIterator]().next();
      idle.abort();
      expect(await waiting).toEqual({ done: true, value: undefined });
    } finally {
      clearInterval(writer);
    }
  });

  it("records the screen: recordVideo, status, stop into a bundle that farm evidence verify accepts; bad input refused before it is sent", async () => {
    await using client = await connect({ env: lab.env });
    await using lease = await client.acquire({ serial });
    await expect(lease.device.recordVideo({ durationSeconds: 0 })).rejects.toMatchObject({ code: "INVALID_ARGUMENT", field: "duration-seconds" });
    // A changing scene: screenrecord, like the real one, writes frames only on change.
    const animation = setInterval(() => phone.state.screen.changed(), 50);
    try {
      const framesBefore = phone.state.recordedFrames.value;
      const rec = await lease.device.recordVideo({ durationSeconds: 30, size: "216x480", label: "from the library" });
      await waitFor("the recording to run", async () => ((await rec.status()).status === "recording" ? true : undefined), { timeoutMs: 30_000 });
      // A stop before the second frame is VIDEO_EMPTY: wait until the encoder has taken three.
      await phone.state.recordedFrames.reached(framesBefore + 3);
      const dir = join(lab.dir.path, "lib-video");
      const done = await rec.stop({ outputDir: dir });
      expect(done).toMatchObject({ recordingId: rec.recordingId, status: "complete", code: "", stored: true, manifestPath: join(dir, "manifest.json") });
      expect(done.manifest).toMatchObject({ evidenceId: rec.recordingId, kind: "video", status: "complete" });
      const verified = await farm(["evidence", "verify", dir], lab.env);
      expect(verified.code, verified.stdout).toBe(0);
    } finally {
      clearInterval(animation);
    }
  });

  it("does what the CLI's device commands do: a retry by request id, a screenshot file with its progress, properties, setprop, logcat text, raw input", async () => {
    await using client = await connect({ env: lab.env });
    await using lease = await client.acquire({ serial });
    const d = lease.device;
    // A retry with the same request id gets the first answer: $$ (a new shell's pid) would differ if it ran twice.
    const first = await d.shell("echo once-$$", { requestId: "lib-retry-1" });
    const retry = await d.shell("echo once-$$", { requestId: "lib-retry-1" });
    expect(retry).toMatchObject({ actionId: first.actionId, stdout: first.stdout });
    expect((await d.shell("echo once-$$")).actionId).not.toBe(first.actionId);
    const conflict = await failure(d.shell("echo other", { requestId: "lib-retry-1" }));
    expect(conflict).toMatchObject({ code: "IDEMPOTENCY_CONFLICT", exitCode: exitCodeFor("IDEMPOTENCY_CONFLICT") });

    // The PNG written to a new file, its bytes counted by the meter the hook gave, and checked like farm screenshot's.
    const file = join(lab.dir.path, "lib-shot.png");
    const seen = { total: 0, bytes: 0, started: 0 };
    const shot = await d.screenshotToFile(file, {
      onDownload: () => {
        seen.started++;
        return { setTotal: (n) => (seen.total = n), add: (n) => (seen.bytes += n) };
      },
    });
    expect(seen).toEqual({ started: 1, total: shot.size, bytes: shot.size });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(createHash("sha256").update(await readFile(file)).digest("hex")).toBe(shot.sha256);
    expect(await sharp(file).metadata()).toMatchObject({ format: "png", width: shot.width, height: shot.height });
    await expect(d.screenshotToFile(file)).rejects.toMatchObject({ code: "EVIDENCE_OUTPUT_EXISTS", field: "file" });
    // The same answer as the CLI's.
    const cliFile = join(lab.dir.path, "cli-shot.png");
    const cli = await farm(["screenshot", cliFile], { ...lab.env, FARM_DEVICE: serial, FARM_LEASE: lease.token });
    expect(cli.json).toMatchObject({ ok: true, file: cliFile, width: shot.width, height: shot.height });

    expect((await d.properties())["ro.serialno"]).toBe("LIB00001");
    const set = await d.setProperty("debug.farm.lib", "on");
    expect(set).toMatchObject({ dispatched: true, ambiguous: false });
    expect((await d.shell("getprop debug.farm.lib")).stdout).toBe("on\n");

    const marker = `lib-text-${Date.now()}`;
    await d.shell(`log -p i -t libtext ${marker}`);
    const log = await waitFor("the line in the phone's log", async () => {
      const r = await d.readLogcat({ lines: 500 });
      return r.text.includes(marker) ? r : undefined;
    });
    expect(log.truncated).toBe(false);

    // An input message as built: the key's name is the agent's to judge, as for `farm input key`.
    expect(await d.sendInput({ case: "key", value: "KEYCODE_HOME" })).toMatchObject({ dispatched: true, ambiguous: false });
  });

  it("captures an evidence bundle into a new directory", async () => {
    await using client = await connect({ env: lab.env });
    await using lease = await client.acquire({ serial });
    const dir = join(lab.dir.path, "bundle");
    const got = await lease.device.captureEvidence({ label: "from the library", context: { run: 1 }, outputDir: dir });
    expect(got).toMatchObject({ status: "complete", manifestPath: join(dir, "manifest.json") });
    expect(got.manifest.evidenceId).toBe(got.evidenceId);
    expect(existsSync(join(dir, "manifest.json"))).toBe(true);
    const verified = await farm(["evidence", "verify", dir], lab.env);
    expect(verified.code, verified.stdout).toBe(0);
  });

  it("makes every call, unary and streaming, over one TCP connection to the coordinator", async () => {
    // A TCP relay in front of the standalone counts the connections the library opens.
    const relay = await startTcpBalancer(() => [String(lab.standalone.ready["url"])]);
    try {
      const token = (await readFile(String(lab.standalone.ready["adminTokenFile"]), "utf8")).trim();
      await using client = await connect({ coordinator: relay.url, token, env: lab.env });
      {
        await using lease = await client.acquire({ serial });
        await lease.device.shell("true");
        await lease.device.uiTree();
        await lease.device.screenshot();
        const session = await lease.startSession({ name: "one-connection" });
        await session.device.key("KEYCODE_HOME");
        await session.steps();
        await session.end("passed");
        await lease.device.captureEvidence({});
        await lease.device.push(Buffer.from("one connection\n"), "/sdcard/Download/lib-one.txt");
        expect((await lease.device.pull("/sdcard/Download/lib-one.txt")).bytes.toString()).toBe("one connection\n");
      }
      expect(relay.accepted).toBe(1);
    } finally {
      await relay.close();
    }
  });

  it("puts the leased phone on the local adb server and takes it away on close", async () => {
    user = await startAdbServer();
    const userPort = user.port;
    await using client = await connect({ env: lab.env });
    await using lease = await client.acquire({ serial });
    const remote = await lease.adbConnect({ adbServerPort: userPort, env: { ...lab.env, ANDROID_ADB_SERVER_PORT: String(userPort) } });
    expect(remote.serial).toMatch(/^127\.0\.0\.1:\d+$/);
    const r = await runAdb(userPort, ["-s", remote.serial, "shell", "getprop", "ro.serialno"]);
    expect(r.stdout.trim()).toBe("LIB00001");
    await remote.close();
    expect(await remote.closed).toBeNull();
    const devices = await runAdb(userPort, ["devices"]);
    expect(devices.stdout).not.toContain(remote.serial);
  });
});
