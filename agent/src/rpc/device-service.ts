import { checkPropValue, checkShellCommand } from "@farm/shared/command-limits";
import { Errors, farmError, NOT_DISPATCHED } from "@farm/shared/errors";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { DeviceService, DeviceTarget, SendInputRequest } from "@farm/shared/gen/farm/v1/device_service_pb";
import type { ElementSelector } from "@farm/shared/gen/farm/v1/ui_pb";
import { shellV2 } from "../adb/adb-shell.js";
import { parseGetprop } from "../evidence/device-observations.js";
import { LIST_THIRD_PARTY, packagePage, parsePackageList } from "../devices/package-list.js";
import { shQuote } from "../actions/shell-quote.js";
import type { InputRequest } from "../actions/input-action.js";
import { readUiTree } from "../ui/read-ui-tree.js";
import { withoutStepMarkers } from "../session/step-markers.js";
import { rectText, resolveElement, selectorField, type ResolvedTarget } from "../ui/element-selector.js";
import { toRecord, type ActionKind } from "../ownership/device-ownership.js";
import { removeAndroidForward } from "../app-sdk/android-endpoint.js";
import { RAW_ADB_KIND } from "../adb-tunnel/raw-adb-action.js";
import { appEndpoint } from "../app-sdk/app-endpoint-command.js";
import { takeScreenshot } from "../evidence/take-screenshot.js";
import { attemptRecorder, callContext, stepRedactor, type CallContext } from "./call-context.js";
import type { AgentServiceDeps } from "./service-deps.js";
import { stageTrace } from "@farm/shared/stage-trace";
import { checkDeviceFilePath } from "@farm/shared/device-files";
import { pullFile } from "../files/pull-file.js";

const propKey = /^[A-Za-z0-9_.-]{1,255}$/;

/**
 * DeviceService on this agent: the phones it owns. The coordinator has
 * already checked who may call what (method rules); this side checks the
 * arguments again and keeps ownership (lock + journal) for every change.
 */
export function agentDeviceService(deps: AgentServiceDeps): ServiceImpl<typeof DeviceService> {
  const kinds = new Map<string, ActionKind<never, unknown>>(
    [deps.shell, deps.setProp, deps.input, deps.reboot, deps.install, deps.pushFile].map((k) => [k.kind, k as ActionKind<never, unknown>]),
  );
  const action = (c: CallContext, target: DeviceTarget | undefined, ctx?: HandlerContext) => {
    const redactor = ctx?.values.get(stepRedactor);
    return {
      serial: serialOf(target),
      deadlineMs: c.deadlineMs,
      requestedBy: c.requestedBy,
      ...(redactor ? { mask: (r: Record<string, unknown>) => redactor.json(r) as Record<string, unknown> } : {}),
      ...(stageTrace ? { traceId: c.commandId } : {}),
      ...(ctx ? { signal: ctx.signal } : {}),
    };
  };
  // A read stops at its deadline, or when its caller cancels.
  const signal = (c: CallContext, ctx: HandlerContext) => AbortSignal.any([AbortSignal.timeout(Math.max(1, c.deadlineMs - Date.now())), ctx.signal]);

  return {
    getOwnership(req) {
      return { ownership: deps.ownership.status(serialOf(req.target)) };
    },
    async reconcileOwnership(req, ctx) {
      const serial = serialOf(req.target);
      const r = await deps.ownership.reconcile(serial, kinds, callContext(ctx).deadlineMs);
      return { settled: r.settled.map(toRecord), unresolved: r.unresolved.map(toRecord), ownership: deps.ownership.status(serial) };
    },
    getActionReceipt(req) {
      return { action: toRecord(deps.ownership.receipt(serialOf(req.target), req.actionId)) };
    },
    abandonAction(req, ctx) {
      const c = callContext(ctx);
      const serial = serialOf(req.target);
      // An admin may abandon any action. Anyone else the coordinator let through holds the phone's
      // lease, and may abandon only a tunnel's raw adb window: the kind is checked here, on the journal's entry.
      const a = deps.ownership.abandon(serial, req.actionId, req.reason, c.requestedBy, c.admin ? {} : { onlyKind: RAW_ADB_KIND });
      // The action is abandoned in the journal already: a failed history write is logged and counted, not answered.
      deps.history.recordAfter({ physicalId: a.physicalId, serial, kind: "action-abandoned", detail: `${a.actionId} by ${c.requestedBy}: ${req.reason}` }, deps.log);
      deps.log.warn("unresolved action abandoned by an operator", { actionId: a.actionId, by: c.requestedBy, reason: req.reason });
      return { action: toRecord(a) };
    },
    async runShell(req, ctx) {
      checkShellCommand(req.command);
      const { action: a, result: out } = await deps.ownership.run(deps.shell, { command: req.command }, action(callContext(ctx), req.target, ctx));
      return { actionId: a.actionId, exitCode: out.exitCode, stdout: out.stdout, stderr: out.stderr, dispatched: true, ambiguous: false };
    },
    async setProperty(req, ctx) {
      if (!propKey.test(req.key)) throw farmError(Errors.INVALID_ARGUMENT, "property key must be 1-255 of A-Z a-z 0-9 _ . -", "key");
      checkPropValue(req.value);
      const { action: a } = await deps.ownership.run(deps.setProp, { key: req.key, value: req.value }, action(callContext(ctx), req.target, ctx));
      return { actionId: a.actionId, dispatched: true, ambiguous: false };
    },
    pinIdentity(req, ctx) {
      if (!callContext(ctx).admin) throw farmError(Errors.PERMISSION_DENIED, "pinning an identity needs an admin user token");
      if (!/^[A-Za-z0-9._-]{0,64}$/.test(req.label)) throw farmError(Errors.INVALID_ARGUMENT, "label must be up to 64 of A-Z a-z 0-9 . _ -", "label");
      const serial = serialOf(req.target);
      deps.pins.set(serial, req.label);
      deps.watcher.refreshIdentities();
      return { physicalId: deps.watcher.device(serial)?.identity.physicalId ?? "" };
    },
    async getProperties(req, ctx) {
      const serial = serialOf(req.target);
      deps.ownership.requireDevice(serial);
      const r = await shellV2(deps.evidence.adb, serial, "getprop", signal(callContext(ctx), ctx));
      return { properties: parseGetprop(r.stdout.toString("utf8")) };
    },
    async listPackages(req, ctx) {
      const serial = serialOf(req.target);
      deps.ownership.requireDevice(serial);
      const r = await shellV2(deps.evidence.adb, serial, LIST_THIRD_PARTY, signal(callContext(ctx), ctx));
      if (r.exitCode !== 0) throw farmError(Errors.ADB_REFUSED, `pm list packages exited ${r.exitCode}: ${r.stderr.toString("utf8").trim().slice(0, 200)}`);
      return packagePage(parsePackageList(r.stdout.toString("utf8")), req.pageSize, req.pageToken);
    },
    async readLogcat(req, ctx) {
      const serial = serialOf(req.target);
      deps.ownership.requireDevice(serial);
      const lines = req.lines || 500;
      if (lines > 10_000) throw farmError(Errors.INVALID_ARGUMENT, "lines must be 1..10000", "lines");
      if (req.since && !/^[0-9: .-]{5,32}$/.test(req.since)) throw farmError(Errors.INVALID_ARGUMENT, "since must be a logcat time like '11-30 06:00:00.000'", "since");
      const command = req.since ? `logcat -d -v threadtime -T ${shQuote(req.since)}` : `logcat -d -v threadtime -t ${lines}`;
      const r = await shellV2(deps.evidence.adb, serial, command, signal(callContext(ctx), ctx));
      // farm's own step markers are not the user's log (session/step-markers.ts).
      return { text: withoutStepMarkers(r.stdout.toString("utf8")), truncated: r.truncated };
    },
    async sendInput(req, ctx) {
      const c = callContext(ctx);
      const input = toInput(req);
      const selector = req.kind.case === "tap" ? req.kind.value.element : undefined;
      if (!selector) {
        const { action: a } = await deps.ownership.run(deps.input, input, action(c, req.target, ctx));
        return { actionId: a.actionId, dispatched: true, ambiguous: false };
      }
      // A tap by element: the tree is read (a read, no lock) and the element
      // resolved before anything is journaled or sent; a failure up to here
      // reached nothing (dispatched: false). The screen may still change
      // between the read and the tap: the journal names what was resolved.
      const serial = serialOf(req.target);
      deps.ownership.requireDevice(serial);
      const tree = await readUiTree(deps.evidence.adb, serial, "", c.deadlineMs, NOT_DISPATCHED);
      // In a session step its messages mask the session's secrets before they cut an element's text.
      const target = resolveElement(tree.roots, selector, "tap.element", ctx.values.get(stepRedactor) ?? undefined);
      const { action: a } = await deps.ownership.run(deps.input, tapAt(target, selector), action(c, req.target, ctx));
      return {
        actionId: a.actionId,
        dispatched: true,
        ambiguous: false,
        element: { selector, element: target.element, x: target.x, y: target.y },
      };
    },
    async getUiTree(req, ctx) {
      const serial = serialOf(req.target);
      if (deps.ios?.device(serial)) throw farmError(Errors.NOT_IMPLEMENTED, "the UI tree is read on Android devices only", "target.serial");
      deps.ownership.requireDevice(serial);
      const tree = await readUiTree(deps.evidence.adb, serial, req.appPackage, callContext(ctx).deadlineMs, undefined, attemptRecorder(ctx));
      return { source: tree.source, roots: tree.roots, nodeCount: tree.nodeCount };
    },
    async reboot(req, ctx) {
      const { action: a } = await deps.ownership.run(deps.reboot, {}, action(callContext(ctx), req.target, ctx));
      return { actionId: a.actionId, dispatched: true, ambiguous: false };
    },
    async takeScreenshot(req, ctx) {
      return takeScreenshot(serialOf(req.target), callContext(ctx).deadlineMs, deps);
    },
    async installApp(req, ctx) {
      if (!/^[0-9a-f-]{36}$/.test(req.blobId)) throw farmError(Errors.INVALID_ARGUMENT, "a blob id from BlobService.UploadBlob is required", "blob_id");
      const { action: a, result: out } = await deps.ownership.run(deps.install, { blobId: req.blobId }, action(callContext(ctx), req.target, ctx));
      return { actionId: a.actionId, output: out.output, dispatched: true, ambiguous: false };
    },
    async pushFile(req, ctx) {
      if (!/^[0-9a-f-]{36}$/.test(req.blobId)) throw farmError(Errors.INVALID_ARGUMENT, "a blob id from BlobService.UploadBlob is required", "blob_id");
      const path = checkDeviceFilePath(req.path);
      const { action: a, result: out } = await deps.ownership.run(deps.pushFile, { blobId: req.blobId, path }, action(callContext(ctx), req.target, ctx));
      return { actionId: a.actionId, size: BigInt(out.size), sha256: out.sha256, dispatched: true, ambiguous: false };
    },
    async pullFile(req, ctx) {
      const serial = serialOf(req.target);
      const path = checkDeviceFilePath(req.path);
      deps.ownership.requireDevice(serial);
      const r = await pullFile(serial, path, callContext(ctx).deadlineMs, deps.evidence);
      return { blobId: r.blobId, size: BigInt(r.size), sha256: r.sha256 };
    },
    async getAppEndpoint(req, ctx) {
      return { endpoint: await appEndpoint(serialOf(req.target), req.app, req.wdaRunner, callContext(ctx).deadlineMs, deps) };
    },
    async removeAppForward(req) {
      const serial = serialOf(req.target);
      deps.ownership.requireDevice(serial);
      await removeAndroidForward(deps.evidence.adb, serial, req.port);
      return {};
    },
  };
}

/** The tap on a resolved element's centre, journaled with the selector and what it resolved to. */
function tapAt(t: ResolvedTarget, selector: ElementSelector): InputRequest {
  const { by, value } = selectorField(selector, "tap.element");
  const e = t.element;
  return {
    kind: "tap",
    x: t.x,
    y: t.y,
    element: { selector: { [by]: value }, type: e.type, text: e.text, resourceId: e.resourceId, contentDesc: e.contentDesc, bounds: rectText(e.bounds) },
  };
}

function toInput(v: SendInputRequest): InputRequest {
  switch (v.kind.case) {
    case "tap":
      if (v.kind.value.element) {
        // Selector checks come first; then x and y must be unset (0 is proto3's unset).
        selectorField(v.kind.value.element, "tap.element");
        if (v.kind.value.x !== 0 || v.kind.value.y !== 0) throw farmError(Errors.INVALID_ARGUMENT, "a tap takes either x and y or an element, not both", "tap", NOT_DISPATCHED);
      }
      return { kind: "tap", x: v.kind.value.x, y: v.kind.value.y };
    case "swipe": {
      const s = v.kind.value;
      return { kind: "swipe", x1: s.x1, y1: s.y1, x2: s.x2, y2: s.y2, durationMs: s.durationMs };
    }
    case "text":
      if (v.kind.value === "" || v.kind.value.length > 1000 || /[\n\0]/.test(v.kind.value)) throw farmError(Errors.INVALID_ARGUMENT, "text must be one line of 1..1000 characters", "text");
      return { kind: "text", text: v.kind.value };
    case "key":
      if (!/^(KEYCODE_[A-Z0-9_]+|\d{1,4})$/.test(v.kind.value)) throw farmError(Errors.INVALID_ARGUMENT, "key must be a key code number or a KEYCODE_* name", "key");
      return { kind: "key", key: v.kind.value };
    default:
      throw farmError(Errors.INVALID_ARGUMENT, "say tap, swipe, text or key", "input");
  }
}

export function serialOf(target: DeviceTarget | undefined): string {
  if (!target?.serial) throw farmError(Errors.INVALID_ARGUMENT, "a device serial is required", "target.serial");
  return target.serial;
}
