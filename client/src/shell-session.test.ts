/**
 * Device.openShell and the recordings API against a stand-in coordinator (a
 * real HTTP/2 Connect server in this process): a shell that echoes what it
 * is sent, answers a resize and exits with the code it is told; and the
 * video calls answering as the coordinator's handlers do. Under test is the
 * client side: the start message, bytes in and out in order, no deadline on
 * a shell, the exit code (or the lack of one), and a recording's state.
 */
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ShellService, type OpenShellRequest } from "@farm/shared/gen/farm/v1/shell_service_pb";
import { VideoService, VideoSessionSchema } from "@farm/shared/gen/farm/v1/video_service_pb";
import { FarmError, type FarmClient } from "./index.js";
import { startStandInCoordinator, type StandInCoordinator } from "./testing/stand-in-coordinator.js";

let standIn: StandInCoordinator | undefined;
let farm: FarmClient | undefined;
let starts: { serial: string; rows: number; cols: number; term: string; lease: string | null; timeout: string | null }[] = [];
let listed: { serial: string; status: string; pageToken: string }[] = [];

const RECORDING = "4dfc8153-9bf5-42c1-9578-49cafd46c593";

function routes(router: ConnectRouter): void {
  router.service(ShellService, {
    async *openShell(requests: AsyncIterable<OpenShellRequest>, ctx) {
      const enc = new TextEncoder();
      for await (const r of requests) {
        if (r.kind.case === "start") {
          const v = r.kind.value;
          starts.push({
            serial: v.target?.serial ?? "",
            rows: v.size?.rows ?? -1,
            cols: v.size?.cols ?? -1,
            term: v.term,
            lease: ctx.requestHeader.get("x-farm-lease"),
            timeout: ctx.requestHeader.get("grpc-timeout") ?? ctx.requestHeader.get("connect-timeout-ms"),
          });
          yield { kind: { case: "actionId", value: "act-shell" } };
        } else if (r.kind.case === "resize") {
          yield { kind: { case: "output", value: enc.encode(`[size ${r.kind.value.rows}x${r.kind.value.cols}]`) } };
        } else if (r.kind.case === "stdin") {
          const text = new TextDecoder().decode(r.kind.value);
          const exit = /^exit (\d+)\r$/.exec(text);
          if (exit) {
            yield { kind: { case: "exitCode", value: Number(exit[1]) } };
            return;
          }
          // "hang up" ends the stream with no exit status, as a coordinator that lost the agent does.
          if (text === "hang up\r") return;
          yield { kind: { case: "output", value: enc.encode(`echo:${text}`) } };
        }
      }
    },
  });
  router.service(VideoService, {
    getVideoStatus: (req) => ({
      session: create(VideoSessionSchema, {
        sessionId: req.sessionId,
        status: "recording",
        serial: "emulator-5554",
        physicalId: "pd-1",
        agentId: "agent-1",
        agentName: "",
        workerAvailable: true,
        recoveryState: "none",
        deadline: timestampFromMs(Date.UTC(2026, 0, 1, 0, 1)),
        createTime: timestampFromMs(Date.UTC(2026, 0, 1)),
        manifestJson: "{\"kind\":\"video\",\"status\":\"recording\"}",
      }),
    }),
    listVideoSessions: (req) => {
      listed.push({ serial: req.serial, status: req.status, pageToken: req.pageToken });
      if (req.pageToken === "") return { sessions: [create(VideoSessionSchema, { sessionId: "r1", status: "complete", agentName: "lab1", agentId: "agent-1" })], nextPageToken: "n" };
      return { sessions: [create(VideoSessionSchema, { sessionId: "r2", status: "failed", code: "VIDEO_EMPTY" })], nextPageToken: "" };
    },
    releaseVideo: (req) => ({ session: create(VideoSessionSchema, { sessionId: req.sessionId, status: "failed", recoveryState: "released" }), released: true, note: `released: ${req.reason}` }),
  });
}

beforeEach(async () => {
  starts = [];
  listed = [];
  standIn = await startStandInCoordinator(routes, { timeoutMs: 100 });
  farm = standIn.farm;
});

afterEach(async () => {
  await standIn?.close();
  standIn = undefined;
});

/** Reads the shell's output until `want` has arrived (or the shell ends). */
async function readUntil(it: AsyncIterator<Uint8Array>, want: string): Promise<string> {
  let text = "";
  while (!text.includes(want)) {
    const n = await it.next();
    if (n.done) break;
    text += new TextDecoder().decode(n.value);
  }
  return text;
}

describe("Device.openShell", () => {
  it("starts with the size, TERM and lease, carries bytes both ways and a resize, and gives the exit code; no deadline on the stream", async () => {
    const d = (farm as FarmClient).device("emulator-5554", { lease: "farml_x" });
    const sh = d.openShell({ size: { rows: 40, cols: 120 }, term: "vt100" });
    const out = sh.output()[Symbol.asyncIterator]();
    sh.write("ls\r");
    expect(await readUntil(out, "echo:ls\r")).toBe("echo:ls\r");
    sh.resize({ rows: 50, cols: 132 });
    expect(await readUntil(out, "]")).toBe("[size 50x132]");
    // The client's 100 ms default deadline is not the shell's: it is still open after it.
    await new Promise((r) => setTimeout(r, 300));
    sh.write(new TextEncoder().encode("pwd\r"));
    expect(await readUntil(out, "pwd")).toBe("echo:pwd\r");
    sh.write("exit 3\r");
    expect((await out.next()).done).toBe(true);
    expect(sh.exitCode()).toBe(3);
    expect(starts).toEqual([{ serial: "emulator-5554", rows: 40, cols: 120, term: "vt100", lease: "farml_x", timeout: null }]);
  });

  it("a shell that ends without an exit status is COORDINATOR_UNAVAILABLE with an unknown outcome", async () => {
    const sh = (farm as FarmClient).device("emulator-5554").openShell();
    sh.write("hang up\r");
    for await (const _ of sh.output()) {
      // nothing arrives
    }
    const err = (() => {
      try {
        sh.exitCode();
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(FarmError);
    expect(err).toMatchObject({ code: "COORDINATOR_UNAVAILABLE", outcome: { dispatched: true, ambiguous: true } });
    expect(starts[0]).toMatchObject({ rows: 24, cols: 80, term: "xterm-256color" });
  });

  it("refuses a size that is not one before anything is sent", () => {
    const d = (farm as FarmClient).device("emulator-5554");
    expect(() => d.openShell({ size: { rows: -1, cols: 80 } })).toThrow(FarmError);
    expect(() => d.openShell({ size: { rows: 24, cols: 1.5 } })).toThrow(/size\.cols/);
    expect(starts).toEqual([]);
  });
});

describe("recordings by id", () => {
  it("reads a recording's state with the fields `farm evidence video status` shows; lists every page; releases one", async () => {
    const c = farm as FarmClient;
    const s = await c.recording(RECORDING).status();
    expect(s).toMatchObject({ recordingId: RECORDING, status: "recording", serial: "emulator-5554", physicalId: "pd-1", agent: "agent-1", workerAvailable: true, recoveryState: "none", stored: false });
    expect(s.deadline?.toISOString()).toBe("2026-01-01T00:01:00.000Z");
    expect(s.createdAt?.toISOString()).toBe("2026-01-01T00:00:00.000Z");
    expect(s.manifestJson).toBe("{\"kind\":\"video\",\"status\":\"recording\"}");
    expect(s.manifest).toEqual({ kind: "video", status: "recording" });
    const all = await c.recordings({ serial: "emulator-5554", status: "complete" });
    expect(all.map((r) => [r.recordingId, r.agent, r.code])).toEqual([["r1", "lab1", ""], ["r2", "", "VIDEO_EMPTY"]]);
    expect(listed).toEqual([{ serial: "emulator-5554", status: "complete", pageToken: "" }, { serial: "emulator-5554", status: "complete", pageToken: "n" }]);
    const rel = await c.recording(RECORDING).release("phone replaced");
    expect(rel).toMatchObject({ released: true, note: "released: phone replaced", state: { recoveryState: "released" } });
  });

  it("refuses a recording id that is not one", () => {
    expect(() => (farm as FarmClient).recording("../x")).toThrow(FarmError);
  });
});
