/**
 * `farm evidence video`'s argument matrix: bad arguments and unknown
 * sessions are refused with their code and field before anything reaches a
 * phone or the disk. The CLI runs in process (main) against a real
 * coordinator and an in-process agent whose services only count calls; the
 * e2e smoke (test/e2e/video.test.ts) keeps the one refusal that needs the
 * phone: a size whose aspect is not the display's (the agent reads the
 * display first).
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCountingFarm, type CountingFarm } from "../support/counting-farm.js";

const SERIAL = "VIDBAD01";
let farm: CountingFarm;
const out = (name: string) => join(farm.dir, "out", name);

beforeAll(async () => {
  farm = await startCountingFarm("video-refusals", [{ serial: SERIAL }]);
});

afterAll(async () => {
  await farm?.stop();
});

describe("farm evidence video start refuses bad arguments", () => {
  const cases: [string, string[], string][] = [
    ["a duration of 0", ["--duration-seconds", "0"], "duration-seconds"],
    ["a duration over 180 s", ["--duration-seconds", "181"], "duration-seconds"],
    ["a fractional duration", ["--duration-seconds", "2.5"], "duration-seconds"],
    ["no duration", [], "duration-seconds"],
    ["an odd width", ["--duration-seconds", "5", "--size", "217x480"], "size"],
    ["a context that is not an object", ["--duration-seconds", "5", "--context-json", "[1]"], "context-json"],
  ];

  it.each(cases)("%s: INVALID_ARGUMENT on %s, nothing reaches the phone, no bundle dir", async (_name, args, field) => {
    const bundle = out(`bad-${field}`);
    const files = await farm.files();
    const r = await farm.cli(["evidence", "video", "start", "--device", SERIAL, ...args, "--output-dir", bundle]);
    expect(r.exitCode).toBe(64);
    expect(r.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field, dispatched: false, ambiguous: false });
    expect(farm.reached).toEqual([]);
    expect(await farm.files()).toEqual(files);
  });

  it("refuses a relative --output-dir whose parent is not in the working directory", async () => {
    const files = await farm.files();
    const r = await farm.cli(["evidence", "video", "start", "--device", SERIAL, "--duration-seconds", "5", "--output-dir", "relative/dir"]);
    expect(r.exitCode).toBe(64);
    expect(r.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "output-dir", dispatched: false, ambiguous: false });
    expect(farm.reached).toEqual([]);
    expect(await farm.files()).toEqual(files);
  });
});

describe("farm evidence video status of a session that is not there", () => {
  it("is EVIDENCE_SESSION_NOT_FOUND for an unknown id", async () => {
    const r = await farm.cli(["evidence", "video", "status", "--session", "2b1f6c1e-4a0b-4a4e-9d7e-6f1c2a3b4c5d"]);
    expect(r.exitCode).toBe(66);
    expect(r.json).toMatchObject({ ok: false, code: "EVIDENCE_SESSION_NOT_FOUND" });
    expect(farm.reached).toEqual([]);
  });

  it("is EVIDENCE_SESSION_NOT_FOUND on session for a manifest path that does not exist", async () => {
    const files = await farm.files();
    const r = await farm.cli(["evidence", "video", "status", "--session", join(farm.dir, "nothing", "manifest.json")]);
    expect(r.exitCode).toBe(66);
    expect(r.json).toMatchObject({ ok: false, code: "EVIDENCE_SESSION_NOT_FOUND", field: "recording" });
    expect(farm.reached).toEqual([]);
    expect(await farm.files()).toEqual(files);
  });

  it("takes the recording once: --recording, or its old spelling --session, not both", async () => {
    const id = "2b1f6c1e-4a0b-4a4e-9d7e-6f1c2a3b4c5d";
    const both = await farm.cli(["evidence", "video", "stop", "--recording", id, "--session", id]);
    expect(both.exitCode).toBe(64);
    expect(both.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "recording" });
    const none = await farm.cli(["evidence", "video", "status"]);
    expect(none.exitCode).toBe(64);
    expect(none.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "recording" });
    expect(String(none.json["message"])).toContain("--recording is required");
    const notAnId = await farm.cli(["evidence", "video", "inspect", "--recording", "not-a-uuid"]);
    expect(notAnId.json).toMatchObject({ ok: false, code: "INVALID_ARGUMENT", field: "recording" });
    expect(farm.reached).toEqual([]);
    // Both spellings reach the same refusal for an unknown recording.
    for (const flag of ["--recording", "--session"]) {
      const r = await farm.cli(["evidence", "video", "status", flag, id]);
      expect(r.json, flag).toMatchObject({ ok: false, code: "EVIDENCE_SESSION_NOT_FOUND" });
    }
  });

  it("lists no recordings after all of the above", async () => {
    expect((await farm.cli(["evidence", "video", "list"])).json["recordings"]).toEqual([]);
  });
});

// Last: the control that the counter counts. A good start reaches the agent.
describe("a good start", () => {
  it("reaches the agent", async () => {
    await farm.cli(["evidence", "video", "start", "--device", SERIAL, "--duration-seconds", "5", "--size", "216x480"]);
    expect(farm.reached).toEqual([`farm.v1.VideoService/StartVideo ${SERIAL}`]);
  });
});
