/**
 * The per-action timeline of recorded sessions, end to end: `farm
 * standalone`, a real adb server, simulated phones and the real CLI. Every
 * action made with FARM_SESSION set is a step with the screen just before
 * and just after it, taken on the agent.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SimDevice } from "../devsim/index.js";
import { walk, type UiNode } from "../devsim/screen/ui-node.js";
import { farm, farmProcess, farmBin, waitFor } from "../support/farm-process.js";
import { startLab, type Lab } from "../support/lab.js";

let lab: Lab;

interface Image {
  sha256?: string;
  width?: number;
  errorCode?: string;
  errorMessage?: string;
  evidenceId?: string;
  path?: string;
}
interface Step {
  sequence: number;
  recordVersion: number;
  action: string;
  description: string;
  method?: string;
  arguments?: Record<string, unknown>;
  result: { ok?: boolean; errorCode?: string; errorMessage?: string; dispatched?: boolean; actionId?: string; exitCode?: number; outputExcerpt?: string; response?: Record<string, unknown> };
  before?: Image;
  after?: Image;
  durationMs?: number;
}

async function steps(id: string): Promise<{ session: Record<string, unknown>; steps: Step[] }> {
  const r = await farm(["session", "show", id], lab.env);
  expect(r.code, r.stderr).toBe(0);
  if (process.env["TL_DEBUG"]) console.log(JSON.stringify(r.json, null, 1).slice(0, 6000));
  return { session: r.json["session"] as Record<string, unknown>, steps: r.json["steps"] as Step[] };
}

async function leaseAndSession(serial: string, extra: string[] = []) {
  const l = await farm(["lease", "acquire", "--device", serial], lab.env);
  expect(l.code, l.stderr).toBe(0);
  const token = (l.json["lease"] as { token: string }).token;
  const s = await farm(["session", "start", "--device", serial, ...extra], { ...lab.env, FARM_LEASE: token });
  expect(s.code, s.stderr).toBe(0);
  const id = (s.json["session"] as { sessionId: string }).sessionId;
  return { token, id, env: { ...lab.env, FARM_LEASE: token, FARM_SESSION: id, FARM_DEVICE: serial } };
}

/** The centre of the launcher icon with this label (the devsim scene: tapping it starts the app). */
function iconCentre(device: SimDevice, label: string): [number, number] {
  const root = device.state.screen.tree() as UiNode;
  const node = [...walk(root)].find((n) => n.text === label && n.clickable);
  if (!node) throw new Error(`no ${label} icon on the devsim screen`);
  const b = node.bounds;
  return [Math.floor((b.left + b.right) / 2), Math.floor((b.top + b.bottom) / 2)];
}

beforeAll(async () => {
  lab = await startLab("session-timeline");
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

describe("session timeline", () => {
  it("records a tap that changes the screen with distinct before and after screenshots, and an unchanged screen once", async () => {
    const { device, serial } = await lab.addDevice({ serialno: "TLINE0001" });
    // Screenshots are compared across steps: a minute turning over in the status bar between two would differ.
    device.state.renderer.clock = () => new Date(Date.UTC(2026, 0, 1, 12, 0));
    const { id, env } = await leaseAndSession(serial);
    const [x, y] = iconCentre(device, "Settings");
    const tap = await farm(["input", "tap", String(x), String(y)], env);
    expect(tap.code, tap.stderr).toBe(0);
    const sh = await farm(["shell", "--", "echo", "hello-timeline"], env);
    expect(sh.code, sh.stderr).toBe(0);
    // Not a step: a read without the session_step rule.
    expect((await farm(["device", "props"], env)).code).toBe(0);

    const { session, steps: list } = await steps(id);
    expect(session).toMatchObject({ stepCount: 2, failedStepCount: 0 });
    expect(list.map((s) => [s.sequence, s.action, s.recordVersion])).toEqual([
      [1, "tap", 2],
      [2, "shell", 2],
    ]);
    const [t, s] = list as [Step, Step];
    expect(t.description).toBe(`tap (${x}, ${y})`);
    expect(t.arguments).toEqual({ tap: { x, y } });
    expect(t.result).toMatchObject({ ok: true, dispatched: true });
    expect(t.result.actionId).toMatch(/.+/);
    expect(t.before?.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(t.after?.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(t.before?.sha256).not.toBe(t.after?.sha256);
    // The shell step saw the screen the tap left, and left it as it was: one stored image.
    expect(s.before?.sha256).toBe(t.after?.sha256);
    expect(s.after?.sha256).toBe(s.before?.sha256);
    expect(s.result).toMatchObject({ ok: true, exitCode: 0 });
    expect(s.result.outputExcerpt).toContain("hello-timeline");
  }, 60_000);

  it("keeps the before screenshot and the failure of an action cut short by a vanishing phone", async () => {
    const { device, serial } = await lab.addDevice({ serialno: "TLINE0002" });
    const { id, env } = await leaseAndSession(serial);
    // The command says on the phone that it runs (so the step's before capture is done), then outlasts the test.
    const running = farm(["shell", "--timeout", "15000", "--", "setprop farm.test.started 1; sleep 30"], env);
    await waitFor("the command running on the phone", () => (device.state.props.get("farm.test.started") === "1" ? true : undefined), { timeoutMs: 45_000 });
    await device.vanish();
    const r = await running;
    expect(r.code).not.toBe(0);
    const { session, steps: list } = await steps(id);
    expect(list).toHaveLength(1);
    const step = list[0] as Step;
    expect(step.action).toBe("shell");
    expect(step.before?.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(step.result.ok ?? false).toBe(false);
    expect(step.result.errorCode).toBe(r.json["code"]);
    // The phone was gone when the after capture was tried: its failure is kept instead of an image.
    expect(step.after?.sha256 ?? "").toBe("");
    expect(step.after?.errorCode).toMatch(/.+/);
    expect(session["failedStepCount"]).toBe(1);
  }, 60_000);

  it("records refusals after the session check, and refuses (without recording) another user's or another phone's call", async () => {
    const { serial } = await lab.addDevice({ serialno: "TLINE0003" });
    const { serial: other } = await lab.addDevice({ serialno: "TLINE0004" });
    const { id, env } = await leaseAndSession(serial);
    // Recorded: the session is right, the lease is not presented.
    const noLease = await farm(["input", "key", "KEYCODE_HOME"], { ...env, FARM_LEASE: "not-the-token" });
    expect(noLease.code).not.toBe(0);
    const refused = String(noLease.json["code"]);
    expect(refused).toMatch(/^LEASE_/);
    // Not recorded: another phone.
    const elsewhere = await farm(["input", "key", "KEYCODE_HOME", "--device", other], env);
    expect(elsewhere.json).toMatchObject({ ok: false, code: "SESSION_MISMATCH" });
    // Not recorded: another user.
    const bot = await farm(["token", "create", "--kind", "user", "--name", "tl-bot", "--role", "operator"], lab.env);
    const botEnv = { ...env, FARM_TOKEN: String(bot.json["token"]) };
    const theirs = await farm(["input", "key", "KEYCODE_HOME"], botEnv);
    expect(theirs.json).toMatchObject({ ok: false, code: "SESSION_MISMATCH" });
    const { session, steps: list } = await steps(id);
    expect(list.map((s) => [s.action, s.result.errorCode])).toEqual([["key", refused]]);
    expect(list[0]?.before).toBeUndefined();
    expect(session).toMatchObject({ stepCount: 1, failedStepCount: 1 });
    // An ended session takes no more steps.
    expect((await farm(["session", "end"], env)).code).toBe(0);
    const late = await farm(["input", "key", "KEYCODE_HOME"], env);
    expect(late.json).toMatchObject({ ok: false, code: "SESSION_ENDED" });
  }, 60_000);

  it("farm lease run --session: a CI-style script's actions, UI-tree read and still capture form the timeline, stored before the session ends failed", async () => {
    const { device, serial } = await lab.addDevice({ serialno: "TLINE0005" });
    const [x, y] = iconCentre(device, "Settings");
    const cli = `"${process.execPath}" "${farmBin}"`;
    const script = [`${cli} input tap --text Settings`, `${cli} ui tree`, `${cli} evidence capture`, `${cli} shell -- ls /no-such-dir`].join(" && ");
    const r = await farmProcess(["lease", "run", "--device", serial, "--session", "--session-name", "ci-script", "--", "sh", "-c", `echo $FARM_SESSION >&2; ${script}`], lab.env);
    expect(r.code, r.stderr).not.toBe(0);
    if (process.env["TL_DEBUG"]) console.log(r.stdout.slice(-3000), r.stderr.slice(-3000));
    const id = (r.stderr.match(/[0-9a-f-]{36}/) ?? [""])[0];
    const { session, steps: list } = await steps(id);
    expect(session).toMatchObject({ status: "failed", name: "ci-script", stepCount: 4 });
    expect(list.map((s) => s.action)).toEqual(["tap", "ui-tree", "evidence", "shell"]);
    const [tap, tree, still, shell] = list as [Step, Step, Step, Step];
    expect(tap.before?.sha256).not.toBe(tap.after?.sha256);
    // A tap by selector names its target: the selector, and where it resolved.
    expect(tap.description).toBe(`tap text="Settings" at (${x}, ${y})`);
    expect(tap.arguments).toEqual({ tap: { element: { text: "Settings" } } });
    expect(tap.result.response?.["element"]).toMatchObject({ selector: { text: "Settings" }, element: { text: "Settings", bounds: expect.any(Object) }, x, y });
    // The UI tree is the step's own result.
    expect((tree.result.response?.["roots"] as unknown[]).length).toBeGreaterThan(0);
    // A still in a session is a version 1 record: its screenshot is the after image.
    expect(still).toMatchObject({ recordVersion: 1, action: "evidence" });
    expect(still.before).toBeUndefined();
    expect(still.after?.evidenceId).toMatch(/^[0-9a-f-]{36}$/);
    expect(still.after?.path).toBe("screenshot.png");
    // The command ran and failed on the phone: the call itself succeeded, with its exit status.
    expect(shell.result.ok).toBe(true);
    expect(shell.result.exitCode).not.toBe(0);
  }, 90_000);
});
