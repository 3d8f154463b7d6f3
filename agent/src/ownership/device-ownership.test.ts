import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Errors, toErrorReport, type ErrorReport } from "@farm/shared/errors";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { openAgentDb } from "../db/open-agent-db.js";
import { openHostJournalDb } from "../db/host-journal-db.js";
import { DeviceHistory } from "../devices/device-history.js";
import { ActionFailed, DeviceOwnership, DispatchFailure, LOCK_RELEASE_MARGIN_MS, type ActionKind, type DispatchProgress } from "./device-ownership.js";
import type { DeviceView, DeviceWatcher } from "../devices/device-watcher.js";
import { OsLock } from "./os-lock.js";
import { OwnershipJournal, type ActionRow } from "./ownership-journal.js";

const AGENT = "agent-test";

/**
 * Stands in for DeviceWatcher: DeviceOwnership only calls device() and
 * aliasesOf(), so those are all it offers (a real watcher needs an adb server).
 */
class FakeWatcher {
  readonly devices = new Map<string, DeviceView>();

  add(serial: string, physicalId: string, state = "device", identityStatus: "ok" | "duplicate" = "ok"): void {
    this.devices.set(serial, { serial, state, facts: { props: {}, bootId: `boot-${physicalId}` }, identity: { physicalId, identityStatus, pinLabel: "" } });
  }

  device(serial: string): DeviceView | undefined {
    return this.devices.get(serial);
  }

  aliasesOf(physicalId: string): string[] {
    return [...this.devices.values()].filter((d) => d.identity.physicalId === physicalId).map((d) => d.serial).sort();
  }
}

interface Req {
  text: string;
  /** Must never reach the journal: journalRequest leaves it out. */
  secret?: string;
}
type Res = { echoed: string };
type Dispatch = (device: DeviceView, req: Req, action: ActionRow, signal: AbortSignal, progress: DispatchProgress) => Promise<{ result: Res; receipt: Record<string, unknown> }>;
type Prove = (device: DeviceView, action: ActionRow, signal: AbortSignal) => Promise<Record<string, unknown> | undefined>;

/** A fake action kind that counts what the class asks of it. */
function fakeKind(kind: string, dispatch: Dispatch, prove: Prove = () => Promise.resolve(undefined)) {
  const calls = { dispatch: 0, prove: 0, acknowledged: [] as ActionRow[] };
  const k: ActionKind<Req, Res> = {
    kind,
    journalRequest: (req) => ({ text: req.text }),
    dispatch: (...args) => {
      calls.dispatch++;
      return dispatch(...args);
    },
    prove: (...args) => {
      calls.prove++;
      return prove(...args);
    },
    acknowledge: (_device, action) => {
      calls.acknowledged.push(action);
      return Promise.resolve();
    },
  };
  return { kind: k, calls };
}

const ok = (): ReturnType<typeof fakeKind> => fakeKind("ok", (_d, req) => Promise.resolve({ result: { echoed: req.text }, receipt: { exitCode: 0 } }));

/** Never settles and ignores its signal: a dispatch stuck on a dead device. */
const never = new Promise<never>(() => {});

async function rejection(p: Promise<unknown>): Promise<ErrorReport> {
  try {
    await p;
  } catch (err) {
    return toErrorReport(err);
  }
  throw new Error("expected a rejection");
}

function thrown(f: () => unknown): ErrorReport {
  try {
    f();
  } catch (err) {
    return toErrorReport(err);
  }
  throw new Error("expected a throw");
}

let dir: string;
let host: ReturnType<typeof openHostJournalDb>;
let agentDb: ReturnType<typeof openAgentDb>;
let journal: OwnershipJournal;
let history: DeviceHistory;
let watcher: FakeWatcher;
let changed: string[];
let own: DeviceOwnership;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-ownership-"));
  host = openHostJournalDb(dir);
  agentDb = openAgentDb(join(dir, "agent.db"));
  journal = new OwnershipJournal(host.db, host.sqlite);
  history = new DeviceHistory(agentDb.db);
  watcher = new FakeWatcher();
  watcher.add("s1", "phys-a");
  watcher.add("s1-tcp", "phys-a"); // the same phone over another transport
  watcher.add("s2", "phys-b");
  changed = [];
  own = new DeviceOwnership({
    lockDir: dir,
    journal,
    watcher: watcher as unknown as DeviceWatcher,
    history,
    agentId: AGENT,
    onUnresolvedChange: (p) => changed.push(p),
  });
});

afterEach(async () => {
  OsLock.closeIdle();
  host.close();
  agentDb.close();
  await rm(dir, { recursive: true, force: true });
});

const ctx = (ms: number, serial = "s1") => ({ serial, deadlineMs: Date.now() + ms, requestedBy: "alice" });

/** An unknown action on phys-a, left by an ambiguous dispatch. */
async function leaveUnknown(kind = "flaky"): Promise<string> {
  const k = fakeKind(kind, (_d, _r, _a, _s, progress) => {
    progress.phase = "sent";
    return Promise.reject(new Error("adb connection reset"));
  });
  const r = await rejection(own.run(k.kind, { text: "x" }, ctx(2000)));
  expect(r.ambiguous).toBe(true);
  return r.actionId as string;
}

describe("DeviceOwnership.run", () => {
  it("journals the action as pending before dispatch, settles it with the receipt and frees the lock", async () => {
    history.record({ physicalId: "phys-a", serial: "s1", kind: "reboot", detail: "boot id x -> y" });
    const seen: { state?: string; dispatched?: number | null; locked?: boolean; holder?: string } = {};
    const k = fakeKind("echo", (device, req, action, signal, progress) => {
      // Inside the dispatch: the entry is already committed, and the lock is ours.
      const row = journal.get(action.actionId);
      seen.state = row?.state;
      seen.dispatched = row?.dispatched;
      const st = own.status("s1");
      seen.locked = st.locked;
      seen.holder = st.holder;
      expect(signal.aborted).toBe(false);
      expect(device.serial).toBe("s1");
      progress.note({ step: "sent" });
      return Promise.resolve({ result: { echoed: req.text }, receipt: { exitCode: 0, provenBy: "test" } });
    });
    const { action, result } = await own.run(k.kind, { text: "hello", secret: "hunter2" }, ctx(2000));

    expect(seen).toEqual({ state: "pending", dispatched: null, locked: true, holder: expect.stringContaining("echo on s1") as unknown });
    expect(result).toEqual({ echoed: "hello" });
    expect(k.calls.dispatch).toBe(1);
    const row = journal.get(action.actionId);
    expect(row).toMatchObject({
      state: "settled",
      settledBy: "completed",
      dispatched: 1,
      ambiguous: false,
      physicalId: "phys-a",
      serial: "s1",
      agentId: AGENT,
      kind: "echo",
      bootId: "boot-phys-a",
      requestedBy: "alice",
      progressJson: "{\"step\":\"sent\"}",
    });
    expect(JSON.parse(row?.receiptJson ?? "")).toEqual({ exitCode: 0, provenBy: "test" });
    // The journal keeps what journalRequest chose, never the whole request.
    expect(row?.requestJson).toContain("hello");
    expect(row?.requestJson).not.toContain("hunter2");
    expect(OsLock.isHeld(own.lockFile("phys-a"))).toBe(false);
    // acknowledge runs off the caller's path: give it a tick.
    await new Promise((r) => setImmediate(r));
    expect(k.calls.acknowledged.map((a) => a.actionId)).toEqual([action.actionId]);
    // Nothing the coordinator is told changed: its pending entry is never reported, and it settled.
    expect(changed).toEqual([]);

    const st = own.status("s1");
    expect(st).toMatchObject({ physicalId: "phys-a", serial: "s1", agentId: AGENT, locked: false, holder: "", identityStatus: "ok", aliases: ["s1", "s1-tcp"] });
    expect(st.unresolved).toEqual([]);
    expect(st.recent.map((a) => [a.actionId, a.state, a.dispatched, a.settledBy])).toEqual([[action.actionId, "settled", true, "completed"]]);
    expect(st.history.map((h) => h.kind)).toEqual(["reboot"]);
  });

  it("settles an ActionFailed (it ran and failed) and reports it as dispatched, not ambiguous", async () => {
    const k = fakeKind("fails", () => Promise.reject(new ActionFailed("exit 3", Errors.SETPROP_FAILED, { exitCode: 3 })));
    const r = await rejection(own.run(k.kind, { text: "x" }, ctx(2000)));
    expect(r).toMatchObject({ code: Errors.SETPROP_FAILED.code, dispatched: true, ambiguous: false, agentId: AGENT });
    const row = journal.get(r.actionId as string);
    expect(row).toMatchObject({ state: "settled", dispatched: 1 });
    expect(JSON.parse(row?.receiptJson ?? "")).toEqual({ exitCode: 3, failed: "exit 3" });
    expect(journal.unresolvedIds("phys-a")).toEqual([]);
  });

  it("records a DispatchFailure that never reached the device as not_dispatched and blocks nothing", async () => {
    const k = fakeKind("refused", () => Promise.reject(new DispatchFailure("adb refused the connection", false, Errors.ADB_REFUSED)));
    const r = await rejection(own.run(k.kind, { text: "x" }, ctx(2000)));
    expect(r).toMatchObject({ code: Errors.ADB_REFUSED.code, dispatched: false, ambiguous: false, agentId: AGENT });
    expect(r.actionId).toBeTruthy();
    expect(journal.get(r.actionId as string)).toMatchObject({ state: "not_dispatched", dispatched: 0, ambiguous: false, errorMessage: "adb refused the connection" });
    expect(journal.unresolvedIds("phys-a")).toEqual([]);
    expect(OsLock.isHeld(own.lockFile("phys-a"))).toBe(false);

    const next = ok();
    await own.run(next.kind, { text: "y" }, ctx(2000));
    expect(next.calls.dispatch).toBe(1);
  });

  it.each([
    {
      name: "an unexpected error after the request left",
      fail: (progress: DispatchProgress) => {
        progress.phase = "sent";
        return new Error("socket hang up");
      },
      code: Errors.INTERNAL.code,
    },
    { name: "DispatchFailure(null)", fail: () => new DispatchFailure("adb went away mid-command", null, Errors.ADB_CONNECTION_LOST), code: Errors.ADB_CONNECTION_LOST.code },
  ])("records $name as unknown, ambiguous, and refuses further runs until resolved; reads still work", async ({ fail, code }) => {
    const k = fakeKind("ambiguous", (_d, _r, _a, _s, progress) => Promise.reject(fail(progress)));
    const r = await rejection(own.run(k.kind, { text: "x" }, ctx(2000)));
    expect(r).toMatchObject({ code, dispatched: null, ambiguous: true, agentId: AGENT });
    expect(r.message).toContain(`the outcome of action ${r.actionId} is unknown`);
    const id = r.actionId as string;
    expect(journal.get(id)).toMatchObject({ state: "unknown", dispatched: null, ambiguous: true });
    expect(OsLock.isHeld(own.lockFile("phys-a"))).toBe(false);
    // The coordinator is told, so it refuses changes to the phone through any agent.
    expect(changed).toEqual(["phys-a"]);

    // The same phone under another serial is refused too, before any dispatch or journal entry.
    const next = ok();
    const refused = await rejection(own.run(next.kind, { text: "y" }, ctx(2000, "s1-tcp")));
    expect(refused).toMatchObject({ code: Errors.DEVICE_OWNERSHIP_UNRESOLVED.code, dispatched: false, ambiguous: false, actionId: id, agentId: AGENT });
    expect(refused.message).toContain(id);
    expect(next.calls.dispatch).toBe(0);
    expect(journal.recent("phys-a").map((a) => a.actionId)).toEqual([id]);
    expect(OsLock.isHeld(own.lockFile("phys-a"))).toBe(false);

    // Another phone is not affected.
    await own.run(next.kind, { text: "z" }, ctx(2000, "s2"));
    expect(next.calls.dispatch).toBe(1);

    const st = own.status("s1");
    expect(st.unresolved.map((a) => [a.actionId, a.state, a.ambiguous])).toEqual([[id, "unknown", true]]);
    expect(own.unresolvedIds("phys-a")).toEqual([id]);
  });

  it.each([
    { phase: "sent" as const, dispatched: null, row: null },
    { phase: "accepted" as const, dispatched: true, row: 1 },
  ])("answers a dispatch stuck past its deadline (phase $phase) with COMMAND_TIMEOUT and frees the lock at the margin", async ({ phase, dispatched, row }) => {
    // The test's own clock and timers: exact whatever the load (bounds on the wall clock failed at load 20 and more).
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    try {
      let abortedAt = 0;
      const k = fakeKind("stuck", (_d, _r, _a, signal, progress) => {
        progress.phase = phase;
        signal.addEventListener("abort", () => (abortedAt = Date.now()));
        return never; // ignores the abort
      });
      const c = ctx(200);
      let answeredAt = 0;
      const answer = rejection(own.run(k.kind, { text: "x" }, c)).finally(() => (answeredAt = Date.now()));

      // The dispatch is told at the deadline; the caller hears, and the lock is free, at deadline + margin, not before.
      await vi.advanceTimersByTimeAsync(200);
      expect(abortedAt).toBe(c.deadlineMs);
      expect(answeredAt).toBe(0);
      await vi.advanceTimersByTimeAsync(LOCK_RELEASE_MARGIN_MS);
      const r = await answer;
      expect(answeredAt).toBe(c.deadlineMs + LOCK_RELEASE_MARGIN_MS);
      expect(OsLock.isHeld(own.lockFile("phys-a"))).toBe(false);

      expect(r).toMatchObject({ code: Errors.COMMAND_TIMEOUT.code, dispatched, ambiguous: true, agentId: AGENT });
      expect(journal.get(r.actionId as string)).toMatchObject({ state: "unknown", dispatched: row, ambiguous: true, errorMessage: "stuck did not finish by its deadline" });
    } finally {
      vi.useRealTimers();
    }
  });

  it("reports COMMAND_TIMEOUT when a dispatch honours its abort with an ordinary error after sending", async () => {
    const k = fakeKind("aborts", (_d, _r, _a, signal, progress) => {
      progress.phase = "sent";
      return new Promise((_, reject) => signal.addEventListener("abort", () => reject(new Error("aborted"))));
    });
    const c = ctx(150);
    const r = await rejection(own.run(k.kind, { text: "x" }, c));
    // It answered without waiting for the overrun margin.
    expect(Date.now() - c.deadlineMs).toBeLessThan(LOCK_RELEASE_MARGIN_MS);
    expect(r).toMatchObject({ code: Errors.COMMAND_TIMEOUT.code, dispatched: null, ambiguous: true });
    expect(journal.get(r.actionId as string)?.state).toBe("unknown");
  });

  it("signals a dispatch's work after its cut (a started probe) to end only once the outcome is recorded", async () => {
    let released: AbortSignal | undefined;
    let late: DispatchProgress | undefined;
    const k = fakeKind("probing", (_d, _r, _a, signal, progress) => {
      progress.phase = "sent";
      late = progress;
      released = progress.released;
      // Cut by its deadline, the dispatch still asks the phone; only the action's release (the overrun) ends that.
      return new Promise((_, reject) => {
        signal.addEventListener("abort", () => expect(progress.released.aborted).toBe(false));
        progress.released.addEventListener("abort", () => reject(new Error("released")));
      });
    });
    const r = await rejection(own.run(k.kind, { text: "x" }, ctx(150)));
    expect(r).toMatchObject({ code: Errors.COMMAND_TIMEOUT.code, dispatched: null, ambiguous: true });
    expect(journal.get(r.actionId as string)?.state).toBe("unknown");
    expect(released?.aborted).toBe(true);
    // One reason made once, not a DOMException (with its stack trace) built per action.
    expect(released?.reason).toMatchObject({ message: "the action has ended" });
    // Asked for only after the outcome is recorded (a dispatch still running past its overrun): already aborted.
    expect(late?.released.aborted).toBe(true);
  });

  it("makes a second run on the same physical device wait for the lock and time out without dispatching", async () => {
    let release!: () => void;
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const first = fakeKind("long", (_d, req) => {
      started();
      return new Promise((resolve) => (release = () => resolve({ result: { echoed: req.text }, receipt: {} })));
    });
    const firstRun = own.run(first.kind, { text: "1" }, ctx(5000));
    await running;

    const second = ok();
    const c = ctx(300, "s1-tcp"); // another serial of the same phone
    const r = await rejection(own.run(second.kind, { text: "2" }, c));
    const answeredAt = Date.now();
    expect(r).toMatchObject({ code: Errors.DEVICE_BUSY.code, dispatched: false, ambiguous: false });
    expect(r.actionId).toBeUndefined();
    expect(r.message).toContain("long on s1");
    // It waited, but answered by its own deadline.
    expect(answeredAt).toBeLessThanOrEqual(c.deadlineMs + 25);
    expect(answeredAt - (c.deadlineMs - 300)).toBeGreaterThanOrEqual(200);
    expect(second.calls.dispatch).toBe(0);
    expect(journal.recent("phys-a")).toHaveLength(1);

    // A waiter with time left gets the lock once the holder is done, never alongside it.
    const third = ok();
    const thirdRun = own.run(third.kind, { text: "3" }, ctx(3000));
    await new Promise((r) => setTimeout(r, 60));
    expect(third.calls.dispatch).toBe(0);
    release();
    await firstRun;
    await thirdRun;
    expect(third.calls.dispatch).toBe(1);
    expect(journal.recent("phys-a").map((a) => a.state)).toEqual(["settled", "settled"]);
  });

  it("ends a run waiting for the lock when its caller cancels: CALL_CANCELLED, not dispatched, never run; status counts the waiters", async () => {
    let release!: () => void;
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const first = fakeKind("long", (_d, req) => {
      started();
      return new Promise((resolve) => (release = () => resolve({ result: { echoed: req.text }, receipt: {} })));
    });
    const firstRun = own.run(first.kind, { text: "1" }, ctx(10_000));
    await running;
    expect(own.status("s1").waiting).toBe(0);

    const second = ok();
    const cancel = new AbortController();
    const secondRun = rejection(own.run(second.kind, { text: "2" }, { ...ctx(10_000), signal: cancel.signal }));
    // Waiting: counted in the phone's status (the lock is polled, so the waiter is counted at once).
    expect(own.status("s1").waiting).toBe(1);
    cancel.abort();
    const r = await secondRun;
    expect(r).toMatchObject({ code: Errors.CALL_CANCELLED.code, dispatched: false, ambiguous: false });
    expect(r.actionId).toBeUndefined();
    expect(own.status("s1").waiting).toBe(0);

    // Once the phone is free the cancelled run stays gone: only the first was ever journaled.
    release();
    await firstRun;
    expect(second.calls.dispatch).toBe(0);
    expect(journal.recent("phys-a").map((a) => JSON.parse(a.requestJson) as unknown)).toEqual([{ text: "1" }]);

    // Cancelled before it started: refused before the device is looked at.
    const third = ok();
    const gone = new AbortController();
    gone.abort();
    expect(await rejection(own.run(third.kind, { text: "3" }, { ...ctx(1000), signal: gone.signal }))).toMatchObject({ code: Errors.CALL_CANCELLED.code, dispatched: false });
    expect(third.calls.dispatch).toBe(0);
  });

  it("turns a pending entry left by a dead process into unknown and refuses on it", async () => {
    // Written under the lock by a process that died: the lock is free again.
    const left = journal.begin({ physicalId: "phys-a", agentId: "agent-dead", serial: "s1", kind: "shell", request: {}, bootId: "b", deadlineAt: Date.now(), requestedBy: "bob" });
    const k = ok();
    const r = await rejection(own.run(k.kind, { text: "x" }, ctx(1000)));
    expect(r).toMatchObject({ code: Errors.DEVICE_OWNERSHIP_UNRESOLVED.code, dispatched: false, actionId: left.actionId, agentId: "agent-dead" });
    expect(k.calls.dispatch).toBe(0);
    expect(journal.get(left.actionId)).toMatchObject({ state: "unknown", ambiguous: true, dispatched: null });
    expect(changed).toContain("phys-a");
  });

  it("refuses a phone that shares its identity with another before touching the journal", async () => {
    watcher.add("dup", "phys-d", "device", "duplicate");
    const k = ok();
    const r = await rejection(own.run(k.kind, { text: "x" }, ctx(1000, "dup")));
    expect(r).toMatchObject({ code: Errors.DUPLICATE_IDENTITY.code, dispatched: false, ambiguous: false, field: "target.serial" });
    expect(k.calls.dispatch).toBe(0);
    expect(journal.recent("phys-d")).toEqual([]);
  });
});

describe("DeviceOwnership.requireDevice", () => {
  it("refuses an unknown or offline serial as not dispatched", async () => {
    watcher.add("off", "phys-o", "offline");
    const unknown = thrown(() => own.requireDevice("nope"));
    expect(unknown).toMatchObject({ code: Errors.DEVICE_OFFLINE.code, dispatched: false, ambiguous: false, field: "target.serial" });
    expect(unknown.message).toContain("not connected");
    const offline = thrown(() => own.requireDevice("off"));
    expect(offline).toMatchObject({ code: Errors.DEVICE_OFFLINE.code, dispatched: false, ambiguous: false, field: "target.serial" });
    expect(offline.message).toContain("is offline");
    expect(own.requireDevice("s1").identity.physicalId).toBe("phys-a");

    // run() says the same and writes nothing.
    const k = ok();
    expect(await rejection(own.run(k.kind, { text: "x" }, ctx(1000, "off")))).toMatchObject({ code: Errors.DEVICE_OFFLINE.code, dispatched: false });
    expect(k.calls.dispatch).toBe(0);
    expect(journal.recent("phys-o")).toEqual([]);

    // Reads still answer for an offline phone; an unknown serial is not found.
    expect(own.status("off").physicalId).toBe("phys-o");
    expect(thrown(() => own.status("nope")).code).toBe(Errors.DEVICE_NOT_FOUND.code);
  });
});

describe("DeviceOwnership.reconcile", () => {
  it("settles unknown actions it can prove, keeps the others, never replays, and unblocks once all are settled", async () => {
    let provable = false;
    const flaky = fakeKind("flaky", () => Promise.reject(new Error("unused")), (device, action, signal) => {
      expect(device.identity.physicalId).toBe("phys-a");
      expect(signal.aborted).toBe(false);
      return Promise.resolve({ provenBy: "record", actionId: action.actionId });
    });
    const shy = fakeKind("shy", () => Promise.reject(new Error("unused")), () => Promise.resolve(provable ? { provenBy: "late record" } : undefined));
    const broken = fakeKind("broken", () => Promise.reject(new Error("unused")), () => Promise.reject(new Error("device gone")));

    const proven = await leaveUnknown("flaky");
    // Further unknown entries written as another run would have left them (a run is refused now).
    const seed = (kind: string): string => {
      const a = journal.begin({ physicalId: "phys-a", agentId: AGENT, serial: "s1", kind, request: {}, bootId: "b", deadlineAt: Date.now(), requestedBy: "bob" });
      journal.unknown(a.actionId, null, "lost");
      return a.actionId;
    };
    const unproven = seed("shy");
    const failing = seed("broken");
    const orphanKind = seed("no-such-kind");
    const kinds = new Map<string, ActionKind<never, unknown>>([
      ["flaky", flaky.kind],
      ["shy", shy.kind],
      ["broken", broken.kind],
    ]);

    const first = await own.reconcile("s1", kinds, Date.now() + 2000);
    expect(first.settled.map((a) => a.actionId)).toEqual([proven]);
    expect(new Set(first.unresolved.map((a) => a.actionId))).toEqual(new Set([unproven, failing, orphanKind]));
    expect(journal.get(proven)).toMatchObject({ state: "settled", settledBy: "reconciled", dispatched: 1, ambiguous: false });
    expect(JSON.parse(journal.get(proven)?.receiptJson ?? "")).toEqual({ provenBy: "record", actionId: proven });
    for (const id of [unproven, failing, orphanKind]) expect(journal.get(id)?.state).toBe("unknown");
    expect(OsLock.isHeld(own.lockFile("phys-a"))).toBe(false);
    await new Promise((r) => setImmediate(r));
    expect(flaky.calls.acknowledged.map((a) => a.actionId)).toEqual([proven]);
    expect(shy.calls.acknowledged).toEqual([]);

    // Still blocked by what could not be proven.
    const next = ok();
    expect((await rejection(own.run(next.kind, { text: "y" }, ctx(1000)))).code).toBe(Errors.DEVICE_OWNERSHIP_UNRESOLVED.code);

    provable = true;
    journal.abandon(failing, "checked by hand", "admin");
    journal.abandon(orphanKind, "checked by hand", "admin");
    const second = await own.reconcile("s1", kinds, Date.now() + 2000);
    expect(second).toMatchObject({ settled: [{ actionId: unproven, state: "settled" }], unresolved: [] });

    await own.run(next.kind, { text: "y" }, ctx(1000));
    expect(next.calls.dispatch).toBe(1);
    // Reconcile only proves: nothing was dispatched again.
    expect([flaky.calls.dispatch, shy.calls.dispatch, broken.calls.dispatch]).toEqual([0, 0, 0]);
    expect([flaky.calls.prove, shy.calls.prove, broken.calls.prove]).toEqual([1, 2, 1]);
  });
});

describe("DeviceOwnership.abandon", () => {
  it("turns an unknown action into abandoned with who and why, and lets runs through again", async () => {
    const id = await leaveUnknown();
    changed.length = 0;
    expect(thrown(() => own.abandon("s1", id, "  ", "admin"))).toMatchObject({ code: Errors.INVALID_ARGUMENT.code, field: "reason" });
    expect(thrown(() => own.abandon("s1", "00000000-0000-4000-8000-00000000dead", "x", "admin"))).toMatchObject({ code: Errors.ACTION_NOT_FOUND.code });
    // An action of another phone is not found through this serial.
    expect(thrown(() => own.abandon("s2", id, "x", "admin")).code).toBe(Errors.ACTION_NOT_FOUND.code);

    const row = own.abandon("s1", id, "phone was wiped", "admin@example");
    expect(row).toMatchObject({ actionId: id, state: "abandoned", abandonReason: "phone was wiped", abandonedBy: "admin@example" });
    expect(row.settledAt).not.toBeNull();
    expect(journal.get(id)?.state).toBe("abandoned");
    expect(changed).toEqual(["phys-a"]);
    expect(own.status("s1").recent.find((a) => a.actionId === id)).toMatchObject({ state: "abandoned", abandonReason: "phone was wiped", abandonedBy: "admin@example" });

    // Only unresolved actions can be abandoned.
    expect(thrown(() => own.abandon("s1", id, "again", "admin")).code).toBe(Errors.INVALID_ARGUMENT.code);

    const next = ok();
    await own.run(next.kind, { text: "y" }, ctx(1000));
    expect(next.calls.dispatch).toBe(1);
  });
});

describe("DeviceOwnership.recoverOrphans", () => {
  it("marks pending entries unknown when their device lock is free, and leaves those of a live holder", () => {
    const pending = (physicalId: string) => journal.begin({ physicalId, agentId: "agent-dead", serial: "sx", kind: "shell", request: {}, bootId: "b", deadlineAt: Date.now() + 1000, requestedBy: "bob" }).actionId;
    const dead = pending("phys-dead");
    const live = pending("phys-live");
    // A live process holding phys-live's lock (here: this one, through another connection).
    const held = OsLock.tryAcquire(own.lockFile("phys-live"), { agentId: "agent-live", kind: "shell" });
    expect(held).toBeDefined();

    expect(own.recoverOrphans()).toBe(1);
    expect(journal.get(dead)).toMatchObject({ state: "unknown", ambiguous: true, dispatched: null, errorMessage: expect.stringContaining("stopped before it finished") as unknown });
    expect(journal.get(live)?.state).toBe("pending");
    expect(changed).toEqual(["phys-dead"]);
    expect(OsLock.isHeld(own.lockFile("phys-dead"))).toBe(false);

    held?.release();
    expect(own.recoverOrphans()).toBe(1);
    expect(journal.get(live)?.state).toBe("unknown");
    expect(own.recoverOrphans()).toBe(0);
  });
});

describe("kinds that misbehave", () => {
  it("records a dispatch that throws synchronously (not async) as not dispatched, with its action id, and frees the lock", async () => {
    const k = fakeKind("sync-throw", () => {
      throw new Error("bad argument before anything was sent");
    });
    const report = await rejection(own.run(k.kind, { text: "x" }, { serial: "s1", deadlineMs: Date.now() + 2_000, requestedBy: "alice" }));
    expect(report).toMatchObject({ dispatched: false, ambiguous: false });
    expect(report.actionId).toMatch(/.+/);
    expect(journal.get(report.actionId as string)?.state).toBe("not_dispatched");
    expect(OsLock.isHeld(own.lockFile("phys-a"))).toBe(false);
  });

  it("records a rejection with something that is not an Error as unknown once it was sent", async () => {
    const k = fakeKind("odd-reject", (_d, _r, _a, _s, progress) => {
      progress.phase = "sent";
      return Promise.reject(undefined);
    });
    const report = await rejection(own.run(k.kind, { text: "x" }, { serial: "s1", deadlineMs: Date.now() + 2_000, requestedBy: "alice" }));
    expect(report).toMatchObject({ dispatched: null, ambiguous: true });
    expect(journal.get(report.actionId as string)?.state).toBe("unknown");
  });

  it("keeps a dispatch that overran its deadline before sending as unknown: it may still send after the lock is gone", async () => {
    const k = fakeKind("stuck-before", () => never);
    const report = await rejection(own.run(k.kind, { text: "x" }, { serial: "s1", deadlineMs: Date.now() + 200, requestedBy: "alice" }));
    expect(report).toMatchObject({ code: Errors.COMMAND_TIMEOUT.code, dispatched: null, ambiguous: true });
    expect(journal.get(report.actionId as string)?.state).toBe("unknown");
    // The next change waits for a reconcile instead of racing the stuck one.
    const next = await rejection(own.run(ok().kind, { text: "y" }, { serial: "s1", deadlineMs: Date.now() + 1_000, requestedBy: "alice" }));
    expect(next.code).toBe(Errors.DEVICE_OWNERSHIP_UNRESOLVED.code);
  });

  it("answers a reconcile by its deadline even when a proof never returns, and frees the lock", async () => {
    const stuck = fakeKind("stuck-proof", (_d, _r, _a, _s, progress) => ((progress.phase = "sent"), Promise.reject(new Error("lost"))), () => never);
    await rejection(own.run(stuck.kind, { text: "x" }, { serial: "s1", deadlineMs: Date.now() + 2_000, requestedBy: "alice" }));
    const deadline = Date.now() + 300;
    const kinds = new Map([[stuck.kind.kind, stuck.kind as unknown as ActionKind<never, unknown>]]);
    // The proof never settles: an answer at all is the deadline's doing (no wall-clock margin, which a loaded machine overran by 3 ms).
    const r = await own.reconcile("s1", kinds, deadline);
    expect(r.settled).toEqual([]);
    expect(r.unresolved).toHaveLength(1);
    expect(OsLock.isHeld(own.lockFile("phys-a"))).toBe(false);
  });

  it("refuses to abandon an action through a serial that is neither its own nor one of its phone's", async () => {
    const k = fakeKind("lost", (_d, _r, _a, _s, progress) => ((progress.phase = "sent"), Promise.reject(new Error("lost"))));
    const report = await rejection(own.run(k.kind, { text: "x" }, { serial: "s1", deadlineMs: Date.now() + 2_000, requestedBy: "alice" }));
    const made = thrown(() => own.abandon("made-up-serial", report.actionId as string, "cleanup", "admin"));
    expect(made.code).toBe(Errors.ACTION_NOT_FOUND.code);
    expect(journal.get(report.actionId as string)?.state).toBe("unknown");
  });
});

describe("DeviceOwnership.abandon by a lease holder", () => {
  it("settles only an action of the kind it is allowed (a tunnel's raw-adb window), never another", async () => {
    const raw = await leaveUnknown("raw-adb");
    // A second unknown entry (a run would now be refused for the first).
    const other = journal.begin({ physicalId: "phys-a", serial: "s1", kind: "flaky", request: {}, bootId: "b", deadlineAt: Date.now(), requestedBy: "alice" }).actionId;
    journal.unknown(other, null, "adb connection reset");
    expect(thrown(() => own.abandon("s1", other, "agent crashed", "alice", { onlyKind: "raw-adb" }))).toMatchObject({ code: Errors.PERMISSION_DENIED.code, field: "action_id" });
    expect(journal.get(other)?.state).toBe("unknown");
    expect(own.abandon("s1", raw, "agent crashed with my tunnel open", "alice", { onlyKind: "raw-adb" })).toMatchObject({ state: "abandoned", abandonedBy: "alice" });
  });

  it("refuses a raw-adb action still running (its tunnel open): only its end settles it", async () => {
    const row = journal.begin({ physicalId: "phys-a", serial: "s1", kind: "raw-adb", request: { tunnelId: "t1" }, bootId: "b", deadlineAt: Date.now() + 60_000, requestedBy: "alice" });
    const lock = OsLock.tryAcquire(own.lockFile("phys-a"), { kind: "raw-adb" });
    try {
      expect(thrown(() => own.abandon("s1", row.actionId, "x", "alice", { onlyKind: "raw-adb" }))).toMatchObject({ code: Errors.DEVICE_BUSY.code, field: "action_id" });
    } finally {
      lock?.release();
    }
  });
});

describe("DeviceOwnership.endLease", () => {
  it("settles the lease's unresolved raw-adb actions as abandoned (lease ended), orphans included, and leaves every other entry", () => {
    const begin = (kind: string, leaseId: string, physicalId = "phys-a") =>
      journal.begin({ physicalId, serial: "s1", kind, request: { tunnelId: `t-${kind}-${leaseId}`, leaseId }, bootId: "b", deadlineAt: Date.now() + 60_000, requestedBy: "alice" }).actionId;
    const crashed = begin("raw-adb", "L1");
    journal.unknown(crashed, true, "the process dispatching this action stopped before it finished");
    // Left pending by a process that died (its lock is free).
    const orphan = begin("raw-adb", "L1", "phys-b");
    const otherLease = begin("raw-adb", "L2");
    journal.unknown(otherLease, true, "x");
    const otherKind = begin("shell", "L1");
    journal.unknown(otherKind, null, "x");
    changed.length = 0;

    const settled = own.endLease("raw-adb", "L1", "released");
    expect(settled.map((a) => a.actionId).sort()).toEqual([crashed, orphan].sort());
    for (const id of [crashed, orphan]) expect(journal.get(id)).toMatchObject({ state: "abandoned", abandonReason: "lease ended", abandonedBy: "lease L1 (released)" });
    expect(journal.get(otherLease)?.state).toBe("unknown");
    expect(journal.get(otherKind)?.state).toBe("unknown");
    expect(changed.sort()).toEqual(["phys-a", "phys-b"]);
    // Again: nothing left to settle.
    expect(own.endLease("raw-adb", "L1", "released")).toEqual([]);
  });

  it("leaves a raw-adb action of the lease whose holder is alive (the lock is held) pending", () => {
    const live = journal.begin({ physicalId: "phys-a", serial: "s1", kind: "raw-adb", request: { tunnelId: "t1", leaseId: "L1" }, bootId: "b", deadlineAt: Date.now() + 60_000, requestedBy: "alice" }).actionId;
    const lock = OsLock.tryAcquire(own.lockFile("phys-a"), { kind: "raw-adb" });
    try {
      expect(own.endLease("raw-adb", "L1", "expired")).toEqual([]);
      expect(journal.get(live)?.state).toBe("pending");
    } finally {
      lock?.release();
    }
  });
});
