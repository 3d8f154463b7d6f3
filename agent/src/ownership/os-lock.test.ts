import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OsLock } from "./os-lock.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-lock-"));
});
const children: ChildProcess[] = [];

afterAll(async () => {
  // Whatever a failed assertion left running is stopped here.
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  await rm(dir, { recursive: true, force: true });
});

// The other process runs this same source, transpiled here, never dist/: a
// stale build must not stand in for the code under test.
const lockSource = ts.transpileModule(readFileSync(fileURLToPath(new URL("./os-lock.ts", import.meta.url)), "utf8"), {
  compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 },
}).outputText;
// Its imports (better-sqlite3) resolve from the agent package, as the source's do.
const agentDir = fileURLToPath(new URL("../..", import.meta.url));

/** A separate Node process that takes the lock and reports when it holds it. */
function holderProcess(file: string) {
  const script = `
    ${lockSource}
    const lock = await OsLock.acquire(${JSON.stringify(file)}, { who: "child" }, Date.now() + 10000);
    console.log(lock ? "held" : "busy");
    if (lock) setInterval(() => {}, 1000);
  `;
  const proc = spawn(process.execPath, ["--input-type=module", "-e", script], { cwd: agentDir, stdio: ["ignore", "pipe", "inherit"] });
  children.push(proc);
  const said = new Promise<string>((resolve) => proc.stdout.once("data", (d: Buffer) => resolve(d.toString().trim())));
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
  return { proc, said, exited };
}

describe("OsLock", () => {
  it("is exclusive within one process and free again after release", () => {
    const file = join(dir, "a.lock");
    const first = OsLock.tryAcquire(file, { who: "first" });
    expect(first).toBeDefined();
    expect(OsLock.tryAcquire(file, { who: "second" })).toBeUndefined();
    expect(OsLock.isHeld(file)).toBe(true);
    expect(OsLock.holder(file)).toMatchObject({ who: "first", pid: process.pid });
    first?.release();
    expect(OsLock.isHeld(file)).toBe(false);
    const again = OsLock.tryAcquire(file, { who: "again" });
    expect(again).toBeDefined();
    again?.release();
  });

  it("creates no file beside the lock to take or free it (a journal created and unlinked per action cost each one ext4 metadata work)", () => {
    const file = join(dir, "light.lock");
    for (let i = 0; i < 2; i++) {
      // The first round opens the connection, the second reuses it: neither writes a rollback journal.
      const lock = OsLock.tryAcquire(file, { who: "light" });
      expect(lock).toBeDefined();
      expect(existsSync(`${file}-journal`)).toBe(false);
      expect(OsLock.isHeld(file)).toBe(true);
      lock?.release();
      expect(existsSync(`${file}-journal`)).toBe(false);
    }
  });

  it("keeps the last holder's record through status probes, and a shorter record replaces a longer one whole", () => {
    const file = join(dir, "holder.lock");
    const long = OsLock.tryAcquire(file, { who: "a-holder-with-a-rather-long-name", kind: "install" });
    long?.release();
    // A probe takes and drops the lock; it must not claim to be a holder (on main it wrote {pid, since}).
    expect(OsLock.isHeld(file)).toBe(false);
    expect(OsLock.holder(file)).toMatchObject({ who: "a-holder-with-a-rather-long-name", kind: "install" });
    const short = OsLock.tryAcquire(file, { who: "b" });
    expect(OsLock.holder(file)).toEqual({ who: "b", pid: process.pid, since: expect.any(String) as string });
    short?.release();
  });

  it("is exclusive across processes, and the OS frees it when the holder is killed", async () => {
    const file = join(dir, "b.lock");
    const child = holderProcess(file);
    expect(await child.said).toBe("held");
    expect(OsLock.tryAcquire(file, { who: "parent" })).toBeUndefined();
    // A waiting acquire gets it as soon as the holder dies, with no expiry involved.
    const waiting = OsLock.acquire(file, { who: "parent" }, Date.now() + 10_000);
    child.proc.kill("SIGKILL");
    await child.exited;
    const lock = await waiting;
    expect(lock).toBeDefined();
    lock?.release();
  });

  it("lets exactly one of two racing processes hold it", async () => {
    const file = join(dir, "c.lock");
    const a = holderProcess(file);
    const b = holderProcess(file);
    // One says "held" at once; the other keeps waiting (and would say "busy" after 10 s).
    const first = await Promise.race([a.said.then((s) => ({ s, p: a })), b.said.then((s) => ({ s, p: b }))]);
    expect(first.s).toBe("held");
    const other = first.p === a ? b : a;
    expect(OsLock.isHeld(file)).toBe(true);
    first.p.proc.kill("SIGKILL");
    await first.p.exited;
    expect(await other.said).toBe("held");
    other.proc.kill("SIGKILL");
    await other.exited;
  });
});
