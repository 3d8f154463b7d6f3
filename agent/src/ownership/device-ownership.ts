import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { actionError, Errors, farmError, NOT_DISPATCHED, type FarmErrorSpec } from "@farm/shared/errors";
import { hopDeadline } from "@farm/shared/deadline";
import type { Logger } from "@farm/shared/log";
import { ActionRecordSchema, OwnershipSchema, type ActionRecord, type Ownership } from "@farm/shared/gen/farm/v1/device_service_pb";
import { OsLock } from "./os-lock.js";
import type { ActionRow, OwnershipJournal } from "./ownership-journal.js";
import type { DeviceView, DeviceWatcher } from "../devices/device-watcher.js";
import type { DeviceHistory } from "../devices/device-history.js";
import { stageTrace } from "@farm/shared/stage-trace";

/**
 * How far a dispatch got, kept up to date by the action kind as it goes:
 * what the journal records when the action cannot report for itself (it
 * overran its deadline). "before": nothing reached the device; "sent": the
 * request left, the device may or may not have taken it; "accepted": the
 * device took it.
 */
export interface DispatchProgress {
  phase: "before" | "sent" | "accepted";
  /** Persists facts observed on the way that reconcile may need as proof. */
  note(facts: Record<string, unknown>): void;
  /**
   * Aborted once the action's outcome is recorded and its lock released.
   * What a dispatch does after its own signal was cut (asking the phone
   * whether a cut job started) is bounded by this, not by a wall-clock
   * margin of its own: a slow answer is waited for, and one that never
   * comes before the lock's overrun leaves the outcome unknown.
   */
  released: AbortSignal;
}

/** How one kind of mutating action reaches the device and proves itself. */
export interface ActionKind<Req, Res> {
  kind: string;
  /** How a busy device names this kind to those refused (e.g. "remote adb tunnel"); default: the kind. */
  holderLabel?: string;
  /**
   * A long-lived hold (a remote adb tunnel): while it runs, its requester's
   * own actions run beside it (one at a time, each with a concurrentRawAdb
   * marker on its receipt); anyone else is refused at once, told `nextStep`.
   */
  sharedWithRequester?: { nextStep(serial: string): string; marker(req: unknown): Record<string, unknown> };
  /** The request as stored in the journal (never secrets). */
  journalRequest(req: Req): Record<string, unknown>;
  /**
   * Performs the action, stopping when the signal aborts (the deadline).
   * Throws DispatchFailure to say how far it got; any other error counts
   * as an unknown outcome.
   */
  dispatch(device: DeviceView, req: Req, action: ActionRow, signal: AbortSignal, progress: DispatchProgress): Promise<{ result: Res; receipt: Record<string, unknown> }>;
  /**
   * Looks for a record the action itself left (never the state of the
   * device, which someone else may have caused). Returns a receipt when
   * proven, undefined when it cannot be proven.
   */
  prove(device: DeviceView, action: ActionRow, signal: AbortSignal): Promise<Record<string, unknown> | undefined>;
  /** Called once the action is settled: removes what the action left on the device for proof. */
  acknowledge?(device: DeviceView, action: ActionRow): Promise<void>;
}

export class DispatchFailure extends Error {
  constructor(
    message: string,
    /** false: never reached the device; null: unknown; true: reached it, outcome unknown. */
    readonly dispatched: boolean | null,
    readonly error: FarmErrorSpec = Errors.DEVICE_OFFLINE,
  ) {
    super(message);
  }
}

/** The action ran on the device and failed: a known outcome, settled. */
export class ActionFailed extends Error {
  constructor(
    message: string,
    readonly error: FarmErrorSpec,
    readonly receipt: Record<string, unknown>,
  ) {
    super(message);
  }
}

export interface ActionContext {
  serial: string;
  /** Until when to wait for the device lock, and (by default) for the action. */
  deadlineMs: number;
  /** A longer bound for the action itself (interactive sessions). */
  runDeadlineMs?: number;
  requestedBy: string;
  /** Masks secrets in the request before it is journaled (a session step's redaction). */
  mask?: ((request: Record<string, unknown>) => Record<string, unknown>) | undefined;
  /** The routed call's command id, for stage marks (FARM_STAGE_TRACE only). */
  traceId?: string;
  /**
   * Aborts when the caller cancels (or goes away). Until the action is
   * journaled the call ends CALL_CANCELLED, not dispatched: a call waiting
   * for a busy phone never runs after its caller left. Once journaled it runs
   * to its end (a device job is detached on the phone) and its outcome is recorded.
   */
  signal?: AbortSignal | undefined;
}

/** A call its caller cancelled before its action was journaled: refused, nothing dispatched. */
function refuseCancelled(ctx: ActionContext): void {
  if (!ctx.signal?.aborted) return;
  throw actionError(Errors.CALL_CANCELLED, `the caller cancelled the call before it reached ${ctx.serial}; nothing was sent to the phone`, NOT_DISPATCHED);
}

/**
 * How long after its deadline an action may still hold the device lock: the
 * dispatch is aborted at the deadline, and whatever it has not finished by
 * then plus this margin is recorded as unknown and the lock released.
 */
export const LOCK_RELEASE_MARGIN_MS = 250;

const phaseDispatched = { before: false, sent: null, accepted: true } as const;

/**
 * The reason an action's signals carry once its outcome is recorded: made
 * once, since an abort without a reason builds a DOMException (a stack
 * trace) per call, twice per action here.
 */
const ACTION_ENDED = new Error("the action has ended");

/**
 * A device lock held by a long-lived action of this process (a tunnel)
 * that its requester's own actions share: the lock is released when the
 * last of them is done, so a change beside the tunnel never runs unlocked.
 */
interface SharedHold {
  lock: OsLock;
  owner: string;
  label: string;
  nextStep: string;
  /** Added to the receipt of every action run beside it. */
  marker: Record<string, unknown>;
  /** False once the long-lived action has ended: nothing new joins. */
  open: boolean;
  /** The long-lived action and the actions beside it still running. */
  users: number;
  /** The owner's actions beside it take turns: each waits for this. */
  turn: Promise<void>;
}

/**
 * Device ownership on this host: one OS-held lock per physical device, and
 * the host journal that records each mutation before it is dispatched.
 * Reads never take the lock and are never blocked by unresolved actions.
 */
export class DeviceOwnership {
  constructor(
    private readonly deps: {
      lockDir: string;
      journal: OwnershipJournal;
      watcher: DeviceWatcher;
      history: DeviceHistory;
      agentId: string;
      log?: Logger;
      /** Told when a device's unresolved actions may have changed. */
      onUnresolvedChange?: (physicalId: string) => void;
    },
  ) {}

  /** Long-lived holds of this process that their requester shares, by physical id. */
  private readonly shared = new Map<string, SharedHold>();
  /** Changes waiting for each device's lock (or their turn beside a hold) now, by physical id: status shows them. */
  private readonly waiters = new Map<string, number>();

  /** Counts a wait for the device while `wait` runs. */
  private async waitingFor<T>(physicalId: string, wait: () => Promise<T>): Promise<T> {
    this.waiters.set(physicalId, (this.waiters.get(physicalId) ?? 0) + 1);
    try {
      return await wait();
    } finally {
      const n = (this.waiters.get(physicalId) ?? 1) - 1;
      if (n > 0) this.waiters.set(physicalId, n);
      else this.waiters.delete(physicalId);
    }
  }

  lockFile(physicalId: string): string {
    return join(this.deps.lockDir, `${physicalId}.lock`);
  }

  /** The online device behind a serial, or a not-dispatched failure. */
  requireDevice(serial: string): DeviceView {
    const d = this.deps.watcher.device(serial);
    if (!d || d.state !== "device") {
      throw actionError(
        Errors.DEVICE_OFFLINE,
        d ? `device ${serial} is ${d.state}` : `device ${serial} is not connected to this agent's adb server`,
        NOT_DISPATCHED,
        "target.serial",
      );
    }
    return d;
  }

  /** Ids of the device's unresolved actions in this host's journal. */
  unresolvedIds(physicalId: string): string[] {
    return this.deps.journal.unresolvedIds(physicalId);
  }

  /**
   * Finds entries left "pending" by processes that died mid-action (on any
   * agent sharing the lock dir) and marks them unknown. A pending entry is
   * only written under the device lock, so one whose lock is free is orphaned.
   */
  recoverOrphans(): number {
    let n = 0;
    for (const physicalId of this.deps.journal.pendingDevices()) {
      const lock = OsLock.tryAcquire(this.lockFile(physicalId), { agentId: this.deps.agentId, kind: "recover" });
      if (!lock) continue;
      try {
        n += this.deps.journal.orphanPending(physicalId);
      } finally {
        lock.release();
      }
      this.deps.onUnresolvedChange?.(physicalId);
    }
    return n;
  }

  async run<Req, Res>(kind: ActionKind<Req, Res>, req: Req, ctx: ActionContext): Promise<{ action: ActionRow; result: Res }> {
    refuseCancelled(ctx);
    const device = this.requireDevice(ctx.serial);
    if (device.identity.identityStatus === "duplicate") {
      throw actionError(
        Errors.DUPLICATE_IDENTITY,
        `device ${ctx.serial} shares its identity (${device.identity.physicalId}) with another phone; pin them apart with \`farm device pin\` before changing either`,
        NOT_DISPATCHED,
        "target.serial",
      );
    }
    const physicalId = device.identity.physicalId;
    const hold = this.shared.get(physicalId);
    if (hold?.open) {
      // Someone else, or a second long-lived hold: refused at once, with what to do about it.
      if (hold.owner !== ctx.requestedBy || kind.sharedWithRequester) throw this.heldByTunnel(physicalId);
      return this.runBeside(hold, kind, req, ctx, device);
    }
    // Waiting for the lock leaves time to say so before the deadline.
    const holding = {
      agentId: this.deps.agentId,
      serial: ctx.serial,
      kind: kind.kind,
      requestedBy: ctx.requestedBy,
      ...(kind.holderLabel ? { label: kind.holderLabel } : {}),
      ...(kind.sharedWithRequester ? { nextStep: kind.sharedWithRequester.nextStep(ctx.serial) } : {}),
    };
    let lock = OsLock.tryAcquire(this.lockFile(physicalId), holding);
    if (!lock) {
      // A tunnel (of another agent process of this host, or one starting or ending here): no use waiting for it.
      const holder = OsLock.holder(this.lockFile(physicalId));
      if (typeof holder?.["nextStep"] === "string" && !this.shared.has(physicalId)) throw this.heldByTunnel(physicalId);
      lock = await this.waitingFor(physicalId, () => OsLock.acquire(this.lockFile(physicalId), holding, hopDeadline(ctx.deadlineMs, 500), undefined, ctx.signal));
    }
    if (!lock) refuseCancelled(ctx);
    if (!lock) {
      const holder = OsLock.holder(this.lockFile(physicalId));
      throw actionError(
        Errors.DEVICE_BUSY,
        `device ${physicalId} is held by another action${holder ? ` (${describeHolder(holder)})` : ""} and did not come free before the deadline`,
        NOT_DISPATCHED,
      );
    }
    if (ctx.traceId) stageTrace?.mark(ctx.traceId, "ag.locked");
    let mine: SharedHold | undefined;
    try {
      refuseCancelled(ctx);
      if (this.deps.journal.orphanPending(physicalId) > 0) this.deps.onUnresolvedChange?.(physicalId);
      this.refuseUnresolved(physicalId, ctx.serial, this.deps.journal.unresolved(physicalId));
      const share = kind.sharedWithRequester;
      const onBegun = share
        ? (action: ActionRow) => {
          mine = {
            lock: lock,
            owner: ctx.requestedBy,
            label: kind.holderLabel ?? kind.kind,
            nextStep: share.nextStep(ctx.serial),
            marker: { actionId: action.actionId, ...share.marker(req) },
            open: true,
            users: 1,
            turn: Promise.resolve(),
          };
          this.shared.set(physicalId, mine);
        }
        : undefined;
      return await this.execute(kind, req, ctx, device, { onBegun, onDispatched: () => mine && (mine.open = false) });
    } finally {
      if (mine) {
        mine.open = false;
        this.leave(physicalId, mine);
      } else {
        lock.release();
      }
    }
  }

  /** One of the owner's actions beside its long-lived hold: its turn among the owner's actions, under the hold's lock. */
  private async runBeside<Req, Res>(hold: SharedHold, kind: ActionKind<Req, Res>, req: Req, ctx: ActionContext, device: DeviceView): Promise<{ action: ActionRow; result: Res }> {
    const physicalId = device.identity.physicalId;
    hold.users += 1;
    const before = hold.turn;
    let done!: () => void;
    const mine = new Promise<void>((resolve) => (done = resolve));
    hold.turn = before.then(() => mine);
    try {
      let timer: NodeJS.Timeout | undefined;
      let onCancel: (() => void) | undefined;
      const turn = await this.waitingFor(physicalId, () => Promise.race([
        before.then(() => true),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), Math.max(0, hopDeadline(ctx.deadlineMs, 500) - Date.now()));
          onCancel = () => resolve(false);
          ctx.signal?.addEventListener("abort", onCancel, { once: true });
        }),
      ]));
      clearTimeout(timer);
      if (onCancel) ctx.signal?.removeEventListener("abort", onCancel);
      refuseCancelled(ctx);
      if (!turn) {
        throw actionError(
          Errors.DEVICE_BUSY,
          `device ${physicalId} is running another of your actions beside your ${hold.label}, and it did not finish before the deadline`,
          NOT_DISPATCHED,
        );
      }
      // The hold's own entry is pending while it runs; any other unresolved entry blocks as always.
      this.refuseUnresolved(physicalId, ctx.serial, this.deps.journal.unresolved(physicalId).filter((a) => a.actionId !== hold.marker["actionId"]));
      return await this.execute(kind, req, ctx, device, { marker: hold.marker });
    } finally {
      // A turn given up on still passes on in order.
      void before.then(done);
      this.leave(physicalId, hold);
    }
  }

  /** One user of a shared hold is done: the last one lets go of the device lock. */
  private leave(physicalId: string, hold: SharedHold): void {
    hold.users -= 1;
    if (hold.users > 0) return;
    if (this.shared.get(physicalId) === hold) this.shared.delete(physicalId);
    hold.lock.release();
  }

  private heldByTunnel(physicalId: string): Error {
    const hold = this.shared.get(physicalId);
    const holder = OsLock.holder(this.lockFile(physicalId));
    const nextStep = hold?.nextStep ?? (typeof holder?.["nextStep"] === "string" ? holder["nextStep"] : "");
    return actionError(
      Errors.DEVICE_BUSY,
      `device ${physicalId} is held by ${holder ? describeHolder(holder) : `a ${hold?.label ?? "long-lived action"} of ${hold?.owner ?? "another user"}`}; only its owner's farm commands run beside it${
        nextStep ? `. To free the phone: ${nextStep}` : ""
      }`,
      NOT_DISPATCHED,
    );
  }

  private refuseUnresolved(physicalId: string, serial: string, unresolved: ActionRow[]): void {
    if (unresolved.length === 0) return;
    const first = unresolved[0] as ActionRow;
    throw actionError(
      Errors.DEVICE_OWNERSHIP_UNRESOLVED,
      `device ${physicalId} has ${unresolved.length} action(s) with an unknown outcome (${unresolved.map((a) => `${a.actionId} by agent ${a.agentId || "?"}`).join(", ")}); run \`farm device ownership reconcile --device ${serial}\``,
      { ...NOT_DISPATCHED, actionId: first.actionId, agentId: first.agentId },
    );
  }

  /** Journals the action, dispatches it and records its outcome; the caller holds the device. */
  private async execute<Req, Res>(
    kind: ActionKind<Req, Res>,
    req: Req,
    ctx: ActionContext,
    device: DeviceView,
    opts: { marker?: Record<string, unknown>; onBegun?: ((action: ActionRow) => void) | undefined; onDispatched?: () => void },
  ): Promise<{ action: ActionRow; result: Res }> {
    const physicalId = device.identity.physicalId;
    const runDeadline = ctx.runDeadlineMs ?? ctx.deadlineMs;
    const action = this.deps.journal.begin({
      physicalId,
      agentId: this.deps.agentId,
      serial: ctx.serial,
      kind: kind.kind,
      request: ctx.mask ? ctx.mask(kind.journalRequest(req)) : kind.journalRequest(req),
      bootId: device.facts.bootId,
      deadlineAt: runDeadline,
      requestedBy: ctx.requestedBy,
    });
    if (ctx.traceId) stageTrace?.mark(ctx.traceId, "ag.committed");
    opts.onBegun?.(action);
    // Beside a raw adb window: the receipt says so, so nobody reads it as proof of the phone's whole state.
    const marked = (receipt: Record<string, unknown>) => (opts.marker ? { ...receipt, concurrentRawAdb: opts.marker } : receipt);
    // A pending entry is not reported (the lock guards it): only an unknown outcome changes what the coordinator is told.
    const ids = { actionId: action.actionId, agentId: this.deps.agentId };
    const journal = this.deps.journal;
    // Made only when a dispatch asks for it (a cut job's probe): an AbortSignal costs microseconds to create.
    let released: AbortController | undefined;
    let ended = false;
    const progress: DispatchProgress = {
      phase: "before",
      note: (facts) => journal.progress(action.actionId, facts),
      get released() {
        if (ended) return AbortSignal.abort(ACTION_ENDED);
        return (released ??= new AbortController()).signal;
      },
    };
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), Math.max(0, runDeadline - Date.now()));
    let overrun: NodeJS.Timeout | undefined;
    try {
      const outcome = await Promise.race([
        // Through a promise, so a kind that throws synchronously is recorded like one that rejects.
        Promise.resolve()
          .then(() => kind.dispatch(device, req, action, abort.signal, progress))
          .then(
            (value) => ({ ok: true as const, value }),
            (error: unknown) => ({ ok: false as const, error }),
          ),
        // Whatever the device does, the lock is free shortly after the deadline.
        new Promise<{ ok: false; error: unknown }>((resolve) => {
          overrun = setTimeout(() => {
            this.deps.log?.warn("an action overran its deadline; recording its outcome as unknown and releasing the device", { actionId: action.actionId, kind: kind.kind });
            // Still running after its abort: even one that had not sent yet may send
            // once the lock is gone, so "before" is no proof of not dispatched here.
            const dispatched = progress.phase === "before" ? null : phaseDispatched[progress.phase];
            resolve({ ok: false, error: new DispatchFailure(`${kind.kind} did not finish by its deadline`, dispatched, Errors.COMMAND_TIMEOUT) });
          }, Math.max(0, runDeadline - Date.now()) + LOCK_RELEASE_MARGIN_MS);
        }),
      ]);
      opts.onDispatched?.();
      if (ctx.traceId) stageTrace?.mark(ctx.traceId, "ag.dispatched");
      if (outcome.ok) {
        const settled = journal.settle(action.actionId, marked(outcome.value.receipt), "completed");
        if (ctx.traceId) stageTrace?.mark(ctx.traceId, "ag.settled");
        this.acknowledge(kind, device, settled);
        return { action: settled, result: outcome.value.result };
      }
      const err = outcome.error;
      if (err instanceof ActionFailed) {
        const settled = journal.settle(action.actionId, marked({ ...err.receipt, failed: err.message }), "completed");
        this.acknowledge(kind, device, settled);
        throw actionError(err.error, err.message, { dispatched: true, ambiguous: false, ...ids });
      }
      const failure = err instanceof DispatchFailure ? err : new DispatchFailure(err instanceof Error ? err.message : `${kind.kind} failed: ${String(err)}`, phaseDispatched[progress.phase], Errors.INTERNAL);
      if (failure.dispatched === false) {
        journal.notDispatched(action.actionId, failure.message);
        throw actionError(failure.error, failure.message, { ...NOT_DISPATCHED, ...ids });
      }
      journal.unknown(action.actionId, failure.dispatched, opts.marker ? `${failure.message} (beside raw adb action ${String(opts.marker["actionId"])})` : failure.message);
      this.deps.onUnresolvedChange?.(physicalId);
      const timedOut = abort.signal.aborted || failure.error === Errors.COMMAND_TIMEOUT;
      throw actionError(
        timedOut ? Errors.COMMAND_TIMEOUT : failure.error,
        `${failure.message}; the outcome of action ${action.actionId} is unknown and ${physicalId} is blocked until reconciled`,
        { dispatched: failure.dispatched, ambiguous: true, ...ids },
      );
    } finally {
      clearTimeout(timer);
      clearTimeout(overrun);
      abort.abort(ACTION_ENDED);
      ended = true;
      released?.abort(ACTION_ENDED);
    }
  }

  private acknowledge<Req, Res>(kind: ActionKind<Req, Res>, device: DeviceView, action: ActionRow): void {
    // Off the caller's path: a record left behind is only pruned later.
    Promise.resolve()
      .then(() => kind.acknowledge?.(device, action))
      .catch((err: unknown) => this.deps.log?.warn("could not remove an action's record from the device", { actionId: action.actionId, error: (err as Error).message }));
  }

  status(serial: string): Ownership {
    const d = this.deps.watcher.device(serial);
    if (!d) throw farmError(Errors.DEVICE_NOT_FOUND, `device ${serial} is not known to this agent (or its properties are not read yet)`, "target.serial");
    const physicalId = d.identity.physicalId;
    const file = this.lockFile(physicalId);
    const locked = OsLock.isHeld(file);
    const holder = locked ? OsLock.holder(file) : undefined;
    return create(OwnershipSchema, {
      physicalId,
      serial,
      agentId: this.deps.agentId,
      locked,
      holder: holder ? describeHolder(holder) : "",
      unresolved: this.deps.journal.unresolved(physicalId).map(toRecord),
      recent: this.deps.journal.recent(physicalId).map(toRecord),
      identityStatus: d.identity.identityStatus,
      aliases: this.deps.watcher.aliasesOf(physicalId),
      history: this.deps.history.recent(physicalId).map((e) => ({ serial: e.serial, kind: e.kind, detail: e.detail, time: timestampFromMs(e.at) })),
      waiting: this.waiters.get(physicalId) ?? 0,
    });
  }

  /**
   * Re-checks every unresolved action of the device for proof of its effect,
   * holding the device lock meanwhile. Never replays an action.
   */
  async reconcile(serial: string, kinds: Map<string, ActionKind<never, unknown>>, deadlineMs: number): Promise<{ settled: ActionRow[]; unresolved: ActionRow[] }> {
    const device = this.requireDevice(serial);
    const physicalId = device.identity.physicalId;
    const lock = await OsLock.acquire(this.lockFile(physicalId), { agentId: this.deps.agentId, serial, kind: "reconcile" }, hopDeadline(deadlineMs, 500));
    if (!lock) throw farmError(Errors.DEVICE_BUSY, `device ${physicalId} is held by another action`);
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), Math.max(0, deadlineMs - Date.now()));
    try {
      this.deps.journal.orphanPending(physicalId);
      const settled: ActionRow[] = [];
      const unresolved: ActionRow[] = [];
      for (const action of this.deps.journal.unresolved(physicalId)) {
        const kind = kinds.get(action.kind);
        let receipt: Record<string, unknown> | undefined;
        try {
          receipt = kind && !abort.signal.aborted ? await withinDeadline(Promise.resolve().then(() => kind.prove(device, action, abort.signal)), deadlineMs + LOCK_RELEASE_MARGIN_MS) : undefined;
        } catch {
          receipt = undefined; // a failed or overdue check proves nothing
        }
        if (receipt && kind) {
          const row = this.deps.journal.settle(action.actionId, receipt, "reconciled");
          settled.push(row);
          this.acknowledge(kind, device, row);
        } else {
          unresolved.push(action);
        }
      }
      return { settled, unresolved };
    } finally {
      clearTimeout(timer);
      lock.release();
      this.deps.onUnresolvedChange?.(physicalId);
    }
  }

  receipt(serial: string, actionId: string): ActionRow {
    const action = this.deps.journal.get(actionId);
    const d = this.deps.watcher.device(serial);
    // A serial this host no longer sees (the phone left) must be the action's own.
    if (!action || (d ? action.physicalId !== d.identity.physicalId : action.serial !== serial)) {
      throw farmError(Errors.ACTION_NOT_FOUND, `no retained action ${actionId} for device ${serial}`, "action_id");
    }
    return action;
  }

  /**
   * Someone accepts an unknown outcome; recorded, never reported as
   * settled. An admin may abandon any action; with `onlyKind` (a lease
   * holder) only an action of that kind, and only once nothing runs it.
   */
  abandon(serial: string, actionId: string, reason: string, by: string, opts: { onlyKind?: string } = {}): ActionRow {
    const action = this.receipt(serial, actionId);
    if (opts.onlyKind !== undefined && action.kind !== opts.onlyKind) {
      throw farmError(Errors.PERMISSION_DENIED, `action ${actionId} is a ${action.kind} action: only an admin may abandon it (the lease holder may abandon a ${opts.onlyKind} action)`, "action_id");
    }
    if (action.state !== "unknown" && action.state !== "pending") {
      throw farmError(Errors.INVALID_ARGUMENT, `action ${actionId} is ${action.state}, not unresolved`, "action_id");
    }
    if (reason.trim() === "") throw farmError(Errors.INVALID_ARGUMENT, "a reason is required", "reason");
    // A pending entry under a held lock is running now (an open tunnel): its own end settles it.
    if (opts.onlyKind !== undefined && action.state === "pending" && OsLock.isHeld(this.lockFile(action.physicalId))) {
      throw farmError(Errors.DEVICE_BUSY, `action ${actionId} is still running (its device lock is held); close it instead (a tunnel: \`farm adb disconnect --device ${serial}\`)`, "action_id");
    }
    const row = this.deps.journal.abandon(actionId, reason, by);
    this.deps.onUnresolvedChange?.(row.physicalId);
    return row;
  }

  /**
   * A lease ended: its unresolved actions of `kind` (a tunnel's raw-adb
   * window left by a process that died) are abandoned, "lease ended". One
   * still running (its lock held) is left to settle itself.
   */
  endLease(kind: string, leaseId: string, reason: string): ActionRow[] {
    const ours = this.deps.journal.unresolvedOfKind(kind).filter((a) => requestLeaseId(a) === leaseId);
    const settled: ActionRow[] = [];
    for (const physicalId of new Set(ours.map((a) => a.physicalId))) {
      const lock = OsLock.tryAcquire(this.lockFile(physicalId), { agentId: this.deps.agentId, kind: "lease-end" });
      try {
        // Held: its pending entries are alive; free: they belong to a process that died.
        if (lock) this.deps.journal.orphanPending(physicalId);
        for (const a of ours) {
          if (a.physicalId !== physicalId || this.deps.journal.get(a.actionId)?.state !== "unknown") continue;
          settled.push(this.deps.journal.abandon(a.actionId, "lease ended", `lease ${leaseId} (${reason})`));
        }
      } finally {
        lock?.release();
      }
      this.deps.onUnresolvedChange?.(physicalId);
    }
    return settled;
  }
}

/** The lease an action's journaled request names, if any. */
function requestLeaseId(a: ActionRow): string {
  try {
    const r = JSON.parse(a.requestJson) as Record<string, unknown>;
    return typeof r["leaseId"] === "string" ? r["leaseId"] : "";
  } catch {
    return "";
  }
}

export function toRecord(a: ActionRow): ActionRecord {
  return create(ActionRecordSchema, {
    actionId: a.actionId,
    physicalId: a.physicalId,
    serial: a.serial,
    kind: a.kind,
    requestSha256: a.requestSha256,
    requestJson: a.requestJson,
    state: a.state,
    ...(a.dispatched === null ? {} : { dispatched: a.dispatched === 1 }),
    ambiguous: a.ambiguous,
    bootId: a.bootId,
    createTime: timestampFromMs(a.createdAt),
    deadlineTime: timestampFromMs(a.deadlineAt),
    ...(a.settledAt === null ? {} : { settleTime: timestampFromMs(a.settledAt) }),
    receiptJson: a.receiptJson,
    settledBy: a.settledBy,
    abandonReason: a.abandonReason,
    abandonedBy: a.abandonedBy,
    errorMessage: a.errorMessage,
    // The coordinator shows a shell command in full only to this caller (and admins).
    requestedBy: a.requestedBy,
  });
}

function describeHolder(h: Record<string, unknown>): string {
  const kind = String(h["kind"] ?? "action");
  // A long-lived holder (a remote adb tunnel) says what it is and whose it is, so the refused know whom to ask.
  const what = typeof h["label"] === "string" && h["label"] ? `${h["label"]} (${kind})` : kind;
  const by = typeof h["requestedBy"] === "string" && h["requestedBy"] ? ` requested by ${h["requestedBy"]}` : "";
  return `pid ${String(h["pid"] ?? "?")}, ${what} on ${String(h["serial"] ?? "?")}${by} since ${String(h["since"] ?? "?")}`;
}

/** The proof, or undefined once the deadline has passed: a check that never returns proves nothing and must not hold the lock. */
function withinDeadline<T>(p: Promise<T | undefined>, deadlineMs: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), Math.max(0, deadlineMs - Date.now()))));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}
