import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { actionError, ErrorCodes, farmError } from "@farm/shared/errors";
import { ActionRecordSchema, OwnershipSchema, type ActionRecord, type Ownership } from "@farm/shared/gen/farm/v1/device_service_pb";
import { OsLock } from "./os-lock.js";
import type { ActionRow, OwnershipJournal } from "./ownership-journal.js";
import type { DeviceView, DeviceWatcher } from "./device-watcher.js";
import type { DeviceHistory } from "./device-history.js";

/** How one kind of mutating action reaches the device and proves itself. */
export interface ActionKind<Req, Res> {
  kind: string;
  /** The request as stored in the journal (never secrets). */
  journalRequest(req: Req): Record<string, unknown>;
  /**
   * Performs the action. Throws DispatchFailure to say how far it got; any
   * other error counts as an unknown outcome.
   */
  dispatch(device: DeviceView, req: Req, action: ActionRow, signal: AbortSignal): Promise<{ result: Res; receipt: Record<string, unknown> }>;
  /**
   * Looks for proof of the recorded action's effect without replaying it.
   * Returns a receipt when proven, undefined when it cannot be proven.
   */
  prove(device: DeviceView, action: ActionRow, signal: AbortSignal): Promise<Record<string, unknown> | undefined>;
}

export class DispatchFailure extends Error {
  constructor(
    message: string,
    /** false: never reached the device; null: unknown; true: reached it, outcome unknown. */
    readonly dispatched: boolean | null,
    readonly code: string = ErrorCodes.deviceOffline,
  ) {
    super(message);
  }
}

/** The action ran on the device and failed: a known outcome, settled. */
export class ActionFailed extends Error {
  constructor(
    message: string,
    readonly code: string,
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
}

/**
 * Device ownership on this host: one OS-held lock per physical device, and
 * the journal that records each mutation before it is dispatched. Reads
 * never take the lock and are never blocked by unresolved actions.
 */
export class DeviceOwnership {
  constructor(
    private readonly deps: {
      lockDir: string;
      journal: OwnershipJournal;
      watcher: DeviceWatcher;
      history: DeviceHistory;
      agentId: string;
    },
  ) {}

  lockFile(physicalId: string): string {
    return join(this.deps.lockDir, `${physicalId}.lock`);
  }

  /** The online device behind a serial, or a not-dispatched failure. */
  requireDevice(serial: string): DeviceView {
    const d = this.deps.watcher.device(serial);
    if (!d || d.state !== "device") {
      throw actionError(
        Code.FailedPrecondition,
        ErrorCodes.deviceOffline,
        d ? `device ${serial} is ${d.state}` : `device ${serial} is not connected to this agent's adb server`,
        { dispatched: false, ambiguous: false },
        "serial",
      );
    }
    return d;
  }

  async run<Req, Res>(kind: ActionKind<Req, Res>, req: Req, ctx: ActionContext): Promise<{ action: ActionRow; result: Res }> {
    const notDispatched = { dispatched: false, ambiguous: false };
    const device = this.requireDevice(ctx.serial);
    if (device.identity.identityStatus === "duplicate") {
      throw actionError(
        Code.FailedPrecondition,
        ErrorCodes.duplicateIdentity,
        `device ${ctx.serial} shares its identity (${device.identity.physicalId}) with another phone; pin them apart with \`farm device pin\` before changing either`,
        notDispatched,
        "serial",
      );
    }
    const physicalId = device.identity.physicalId;
    // Waiting for the lock leaves time to say so before the deadline.
    const lockDeadline = ctx.deadlineMs - Math.min(500, Math.max(0, ctx.deadlineMs - Date.now()) * 0.2);
    const lock = await OsLock.acquire(this.lockFile(physicalId), { agentId: this.deps.agentId, serial: ctx.serial, kind: kind.kind }, lockDeadline);
    if (!lock) {
      const holder = OsLock.holder(this.lockFile(physicalId));
      throw actionError(
        Code.Unavailable,
        ErrorCodes.deviceBusy,
        `device ${physicalId} is held by another action${holder ? ` (${describeHolder(holder)})` : ""} and did not come free before the deadline`,
        notDispatched,
      );
    }
    try {
      if (this.deps.journal.hasUnresolved(physicalId)) {
        const unresolved = this.deps.journal.unresolved(physicalId);
        throw actionError(
          Code.FailedPrecondition,
          ErrorCodes.deviceOwnershipUnresolved,
          `device ${physicalId} has ${unresolved.length} action(s) with an unknown outcome (${unresolved.map((a) => a.actionId).join(", ")}); run \`farm device ownership reconcile --device ${ctx.serial}\``,
          notDispatched,
        );
      }
      const action = this.deps.journal.begin({
        physicalId,
        serial: ctx.serial,
        kind: kind.kind,
        request: kind.journalRequest(req),
        bootId: device.facts.bootId,
        deadlineAt: ctx.runDeadlineMs ?? ctx.deadlineMs,
        requestedBy: ctx.requestedBy,
      });
      const abort = new AbortController();
      const timer = setTimeout(() => abort.abort(), Math.max(0, (ctx.runDeadlineMs ?? ctx.deadlineMs) - Date.now()));
      try {
        const { result, receipt } = await kind.dispatch(device, req, action, abort.signal);
        return { action: this.deps.journal.settle(action.actionId, receipt, "completed"), result };
      } catch (err) {
        if (err instanceof ActionFailed) {
          this.deps.journal.settle(action.actionId, { ...err.receipt, failed: err.message }, "completed");
          throw actionError(Code.Aborted, err.code, err.message, { dispatched: true, ambiguous: false });
        }
        const failure = err instanceof DispatchFailure ? err : new DispatchFailure((err as Error).message, null, ErrorCodes.internal);
        if (failure.dispatched === false) {
          this.deps.journal.notDispatched(action.actionId, failure.message);
          throw actionError(Code.Unavailable, failure.code, failure.message, notDispatched);
        }
        this.deps.journal.unknown(action.actionId, failure.dispatched, failure.message);
        throw actionError(
          abort.signal.aborted ? Code.DeadlineExceeded : Code.Unavailable,
          abort.signal.aborted ? ErrorCodes.commandTimeout : failure.code,
          `${failure.message}; the outcome of action ${action.actionId} is unknown and ${physicalId} is blocked until reconciled`,
          { dispatched: failure.dispatched, ambiguous: true },
        );
      } finally {
        clearTimeout(timer);
      }
    } finally {
      lock.release();
    }
  }

  status(serial: string): Ownership {
    const d = this.deps.watcher.device(serial);
    if (!d) throw farmError(Code.NotFound, ErrorCodes.deviceNotFound, `device ${serial} is not known to this agent (or its properties are not read yet)`, "serial");
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
    });
  }

  /**
   * Re-checks every unresolved action of the device for proof of its effect,
   * holding the device lock meanwhile. Never replays an action.
   */
  async reconcile(serial: string, kinds: Map<string, ActionKind<never, unknown>>, deadlineMs: number): Promise<{ settled: ActionRow[]; unresolved: ActionRow[] }> {
    const device = this.requireDevice(serial);
    const physicalId = device.identity.physicalId;
    const lock = await OsLock.acquire(this.lockFile(physicalId), { agentId: this.deps.agentId, serial, kind: "reconcile" }, deadlineMs);
    if (!lock) throw farmError(Code.Unavailable, ErrorCodes.deviceBusy, `device ${physicalId} is held by another action`);
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), Math.max(0, deadlineMs - Date.now()));
    try {
      const settled: ActionRow[] = [];
      const unresolved: ActionRow[] = [];
      for (const action of this.deps.journal.unresolved(physicalId)) {
        const kind = kinds.get(action.kind);
        let receipt: Record<string, unknown> | undefined;
        try {
          receipt = kind ? await kind.prove(device, action, abort.signal) : undefined;
        } catch {
          receipt = undefined; // a failed check proves nothing
        }
        if (receipt) settled.push(this.deps.journal.settle(action.actionId, receipt, "reconciled"));
        else unresolved.push(action);
      }
      return { settled, unresolved };
    } finally {
      clearTimeout(timer);
      lock.release();
    }
  }

  receipt(serial: string, actionId: string): ActionRow {
    const action = this.deps.journal.get(actionId);
    const d = this.deps.watcher.device(serial);
    if (!action || (d && action.physicalId !== d.identity.physicalId)) {
      throw farmError(Code.NotFound, ErrorCodes.actionNotFound, `no retained action ${actionId} for device ${serial}`, "action_id");
    }
    return action;
  }

  /** An admin accepts an unknown outcome; recorded, never reported as settled. */
  abandon(serial: string, actionId: string, reason: string, by: string): ActionRow {
    const action = this.receipt(serial, actionId);
    if (action.state !== "unknown" && action.state !== "pending") {
      throw farmError(Code.FailedPrecondition, ErrorCodes.invalidArgument, `action ${actionId} is ${action.state}, not unresolved`, "action_id");
    }
    if (reason.trim() === "") throw farmError(Code.InvalidArgument, ErrorCodes.invalidArgument, "a reason is required", "reason");
    return this.deps.journal.abandon(actionId, reason, by);
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
  });
}

function describeHolder(h: Record<string, unknown>): string {
  return `pid ${String(h["pid"] ?? "?")}, ${String(h["kind"] ?? "action")} on ${String(h["serial"] ?? "?")} since ${String(h["since"] ?? "?")}`;
}
