/**
 * Taps spelled wrong are refused by the CLI before anything is sent: a tap
 * by element with coordinates too, two selectors, a selector on another
 * input, an empty selector, a coordinate that is not a number. The CLI runs
 * in process (main) with the phone's lease against a real coordinator and an
 * in-process agent whose services only count calls: each refusal is
 * INVALID_ARGUMENT on its field in the pre-dispatch envelope, and nothing
 * reaches the agent. The e2e smoke is test/e2e/ui-tree.test.ts (tap X Y
 * with --text). A bad setprop key or key event is the agent's to refuse
 * (test/e2e/ownership-deadlines.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCountingFarm, type CountingFarm } from "../support/counting-farm.js";

const SERIAL = "INPUT001";
let farm: CountingFarm;
let leased: NodeJS.ProcessEnv;

beforeAll(async () => {
  farm = await startCountingFarm("input-refusals", [{ serial: SERIAL }]);
  const lease = await farm.cli(["lease", "acquire", "--device", SERIAL]);
  expect(lease.exitCode, JSON.stringify(lease.json)).toBe(0);
  leased = { ...farm.env, FARM_LEASE: String((lease.json["lease"] as { token: string }).token) };
  // What the lease itself asked of the agent is not under test.
  farm.reached.length = 0;
});

afterAll(async () => {
  await farm?.stop();
});

describe("a device change spelled wrong", () => {
  const cases: { name: string; args: string[]; field: string; message?: string }[] = [
    { name: "a tap by coordinates and by element", args: ["input", "--device", SERIAL, "tap", "10", "20", "--text", "Settings"], field: "tap" },
    { name: "two selectors", args: ["input", "--device", SERIAL, "tap", "--id", "a", "--text", "b"], field: "text", message: "say one of --id, --text or --desc" },
    { name: "a selector on a key event", args: ["input", "--device", SERIAL, "key", "KEYCODE_HOME", "--text", "Settings"], field: "text" },
    { name: "an empty selector", args: ["input", "--device", SERIAL, "tap", "--text", ""], field: "text" },
    { name: "a coordinate that is not a number", args: ["input", "tap", "x", "10", "--device", SERIAL], field: "x" },
  ];

  it.each(cases)("$name: INVALID_ARGUMENT on $field, nothing sent", async ({ args, field, message }) => {
    const r = await farm.cli(args, leased);
    expect(r.exitCode).toBe(64);
    expect(r.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field, dispatched: false, ambiguous: false });
    if (message) expect(String(r.json["message"])).toContain(message);
    expect(farm.reached).toEqual([]);
  });

  // Last: the control that the counter counts. A good tap reaches the agent.
  it("a good tap reaches the agent", async () => {
    await farm.cli(["input", "--device", SERIAL, "tap", "135", "304"], leased);
    expect(farm.reached.length).toBeGreaterThan(0);
    expect(farm.reached.every((c) => c.endsWith(` ${SERIAL}`))).toBe(true);
  });
});
