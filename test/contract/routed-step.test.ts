/**
 * A routed call that is a step of a recorded session, without the network:
 * the coordinator's AttachSession.callStep sends the step, the agent's
 * dispatcher takes a screenshot just before and just after the handler (a
 * fake shooter stands in for adb: what it returns is what the real one
 * builds), and the answer carries them back, also when the handler fails.
 */
import { describe, expect, it } from "vitest";
import { create, type DescMessage, type DescMethodUnary, type MessageInitShape } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { actionError, Errors, toErrorReport } from "@farm/shared/errors";
import { createLogger } from "@farm/shared/log";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import { StepShotSchema, type RedactionSchema, type StepShot } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { callDispatcher, type CallDispatcher } from "@farm/agent/rpc/call-dispatch";
import type { ServiceRoute } from "@farm/agent/rpc/routes";
import { attemptRecorder, callContext } from "@farm/agent/rpc/call-context";
import type { StepShooter } from "@farm/agent/session/step-shooter";
import { AttachSession } from "@farm/coordinator/routing/agent-session";

const by = { tokenName: "alice", admin: false };

/** Records the order of events: captures, then what settles them (checks, uploads). */
function shooter(events: string[], known: string[][]): StepShooter {
  let n = 0;
  return {
    async capture(serial, untilMs) {
      n++;
      events.push(`shot ${n} of ${serial}`);
      expect(untilMs).toBeGreaterThan(Date.now());
      return { captureTime: timestampNow(), bytes: Buffer.from(`screen ${n}`), sha256: String(n).repeat(64) };
    },
    async settle(raw, k) {
      known.push([...k]);
      if ("error" in raw) throw new Error("no capture");
      const i = raw.sha256.slice(0, 1);
      return create(StepShotSchema, { blobId: `blob-${i}`, sha256: raw.sha256, width: 10, height: 20, size: BigInt(raw.bytes.length) });
    },
  };
}

function agent(impl: Partial<ServiceImpl<typeof DeviceService>>, shots: StepShooter): CallDispatcher {
  return callDispatcher({ routes: [{ service: DeviceService, impl } as unknown as ServiceRoute], drainReason: () => "", log: createLogger({ level: "error" }), hostPaths: [], shots });
}

async function step<I extends DescMessage, O extends DescMessage>(
  dispatch: CallDispatcher,
  method: DescMethodUnary<I, O>,
  req: MessageInitShape<I>,
  deadlineMs = Date.now() + 10_000,
  redaction?: MessageInitShape<typeof RedactionSchema>,
) {
  const session = new AttachSession("agent-token");
  const answer = session.callStep(method, req, by, deadlineMs, { sessionId: "s-1", sequence: 4, knownSha256: ["k".repeat(64)], ...(redaction ? { redaction } : {}) });
  for await (const msg of session.outgoing) {
    if (msg.kind.case !== "call") continue;
    session.resolve(await dispatch(msg.kind.value));
    break;
  }
  return answer;
}

describe("a routed session step", () => {
  it("is captured just before and just after the handler, with the action's own time, and the screens the coordinator has are passed on", async () => {
    const events: string[] = [];
    const known: string[][] = [];
    let actionDeadline = 0;
    const dispatch = agent(
      {
        async sendInput(_req, ctx) {
          events.push("action");
          actionDeadline = callContext(ctx).deadlineMs;
          return { actionId: "a-1", dispatched: true, ambiguous: false };
        },
      },
      shooter(events, known),
    );
    const deadline = Date.now() + 10_000;
    const r = await step(dispatch, DeviceService.method.sendInput, { target: { serial: "S-1" }, kind: { case: "key", value: "KEYCODE_HOME" } }, deadline);
    expect(events).toEqual(["shot 1 of S-1", "action", "shot 2 of S-1"]);
    expect(r.response?.actionId).toBe("a-1");
    expect(r.evidence?.before).toMatchObject({ blobId: "blob-1", sha256: "1".repeat(64) });
    expect(r.evidence?.after).toMatchObject({ blobId: "blob-2" });
    expect(r.evidence?.startTime).toBeDefined();
    // The action stops early enough to leave the after capture its time.
    expect(actionDeadline).toBeLessThan(deadline - 1_000);
    // The coordinator's known screens, then the before screen as well: the same screen after is not sent twice.
    expect(known[0]).toEqual(["k".repeat(64)]);
    expect(known[1]).toEqual(["k".repeat(64), "1".repeat(64)]);
  });

  it("keeps both captures and the failure when the handler fails", async () => {
    const events: string[] = [];
    const dispatch = agent(
      {
        async runShell() {
          events.push("action");
          throw actionError(Errors.DEVICE_OFFLINE, "gone mid-action", { dispatched: null, ambiguous: true, actionId: "a-2" });
        },
      },
      shooter(events, []),
    );
    const r = await step(dispatch, DeviceService.method.runShell, { target: { serial: "S-1" }, command: "sleep 5" });
    expect(events).toEqual(["shot 1 of S-1", "action", "shot 2 of S-1"]);
    expect(toErrorReport(r.error)).toMatchObject({ code: "DEVICE_OFFLINE", dispatched: null, ambiguous: true, actionId: "a-2" });
    expect(r.evidence?.before?.blobId).toBe("blob-1");
    expect(r.evidence?.after?.blobId).toBe("blob-2");
  });

  it("carries attempts a handler gave up on", async () => {
    const dispatch = agent(
      {
        async getUiTree(_req, ctx) {
          attemptRecorder(ctx)?.({ startedAt: Date.now() - 30, durationMs: 30, error: new Error("socket hang up") });
          return { source: "app-sdk", roots: [], nodeCount: 0 };
        },
      },
      shooter([], []),
    );
    const r = await step(dispatch, DeviceService.method.getUiTree, { target: { serial: "S-1" }, appPackage: "com.example" });
    expect(r.evidence?.attempts).toHaveLength(1);
    expect(r.evidence?.attempts[0]).toMatchObject({ durationMs: 30, error: { message: "socket hang up" } });
  });

  it("masks every UI tree it answers with, by the step's labels, fields and secrets: a tree read, a tap by element", async () => {
    const SECRET = "Zq7Kx9WvpL-tree";
    const el = (over: Record<string, unknown>) => ({
      type: "android.widget.EditText",
      text: "",
      resourceId: "",
      contentDesc: "",
      bounds: { left: 0, top: 0, right: 10, bottom: 10 },
      enabled: true,
      clickable: true,
      focused: false,
      packageName: "com.app",
      children: [],
      ...over,
    });
    const password = el({ resourceId: "com.app:id/password", text: "hunter2-typed" });
    const card = el({ text: `card of ${SECRET}`, contentDesc: "card number 4111" });
    const tree = { source: "uiautomator", nodeCount: 3, roots: [el({ type: "android.widget.FrameLayout", children: [password, card] })] };
    const dispatch = agent(
      {
        getUiTree: () => tree,
        sendInput: () => ({ actionId: "a-3", dispatched: true, ambiguous: false, element: { selector: { by: { case: "resourceId", value: "password" } }, element: password, x: 5, y: 5 } }),
      },
      shooter([], []),
    );
    const redaction = { secrets: [SECRET], labels: ["password"], fields: ["contentDesc"] };
    const read = await step(dispatch, DeviceService.method.getUiTree, { target: { serial: "S-1" } }, undefined, redaction);
    const [masked, maskedCard] = read.response?.roots[0]?.children ?? [];
    expect(masked).toMatchObject({ resourceId: "com.app:id/password", text: "[redacted]", bounds: { right: 10 } });
    expect(maskedCard).toMatchObject({ text: "card of [redacted]", contentDesc: "[redacted]", type: "android.widget.EditText" });
    const tapped = await step(dispatch, DeviceService.method.sendInput, { target: { serial: "S-1" }, kind: { case: "tap", value: { element: { by: { case: "resourceId", value: "password" } } } } }, undefined, redaction);
    expect(tapped.response?.element?.element).toMatchObject({ resourceId: "com.app:id/password", text: "[redacted]" });
    expect(tapped.response?.element).toMatchObject({ x: 5, y: 5 });
    // A step with nothing to mask reads the phone as it is.
    const plain = await step(dispatch, DeviceService.method.getUiTree, { target: { serial: "S-1" } });
    expect(plain.response?.roots[0]?.children[0]?.text).toBe("hunter2-typed");
  });

  it("takes no captures for a method that is not a step, nor outside a session", async () => {
    const events: string[] = [];
    const dispatch = agent({ getOwnership: () => ({}), sendInput: () => ({ actionId: "x", dispatched: true, ambiguous: false }) }, shooter(events, []));
    const r = await step(dispatch, DeviceService.method.getOwnership, { target: { serial: "S-1" } });
    expect(r.evidence).toBeUndefined();
    const session = new AttachSession("agent-token");
    const plain = session.call(DeviceService.method.sendInput, { target: { serial: "S-1" } }, by, Date.now() + 5_000);
    for await (const msg of session.outgoing) {
      if (msg.kind.case === "call") {
        session.resolve(await dispatch(msg.kind.value));
        break;
      }
    }
    await plain;
    expect(events).toEqual([]);
  });

  it("says so in the shot when a capture fails, and the action still runs", async () => {
    const failing: StepShooter = {
      capture: async () => ({ captureTime: timestampNow(), error: new Error("screencap failed") }),
      settle: async (raw) => create(StepShotSchema, { captureTime: raw.captureTime, error: { message: "screencap failed", status: 14, detail: { code: "SCREENSHOT_TRANSFER_FAILED" } } }) as StepShot,
    };
    let ran = false;
    const dispatch = agent({ sendInput: () => ((ran = true), { actionId: "y", dispatched: true, ambiguous: false }) }, failing);
    const r = await step(dispatch, DeviceService.method.sendInput, { target: { serial: "S-1" } } as MessageInitShape<typeof DeviceService.method.sendInput.input>);
    expect(ran).toBe(true);
    expect(r.evidence?.before?.error?.detail?.code).toBe("SCREENSHOT_TRANSFER_FAILED");
  });
});
