/**
 * The CLI's clients over a real HTTP/2 Connect server in this process: the
 * coordinator's answer given at the deadline the CLI sent is what the CLI
 * reports, and with no answer at all it gives up DEADLINE_GRACE_MS later,
 * its own interceptors (request id, explain) leaving the outcome intact.
 * The server shares this process's event loop: a call the machine stalled
 * past the grace is told apart by its measured stall, not by a time margin.
 */
import { createServer, type Http2Server, type ServerHttp2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { afterEach, describe, expect, it } from "vitest";
import { ConnectError, type ConnectRouter, type HandlerContext } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { DEADLINE_GRACE_MS } from "@farm/shared/deadline";
import { actionError, Errors, toErrorReport } from "@farm/shared/errors";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { serviceClient } from "./transport.js";

let server: Http2Server | undefined;
const sessions: ServerHttp2Session[] = [];
afterEach(async () => {
  for (const s of sessions.splice(0)) s.destroy();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  server = undefined;
});

async function coordinator(setProperty: (ctx: HandlerContext) => Promise<never>): Promise<string> {
  server = createServer(connectNodeAdapter({ routes: (router: ConnectRouter) => void router.service(DeviceService, { setProperty: (_req, ctx) => setProperty(ctx) }) }));
  server.on("session", (s) => sessions.push(s));
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function deadlinePassed(ctx: HandlerContext): Promise<void> {
  return new Promise((resolve) => (ctx.signal.aborted ? resolve() : ctx.signal.addEventListener("abort", () => resolve(), { once: true })));
}

async function setprop(url: string, timeoutMs: number): Promise<ConnectError> {
  const client = serviceClient(DeviceService, { coordinator: url, coordinatorSource: "test", token: "t", caFile: undefined, insecure: false });
  return client.setProperty({ target: { serial: "S1" }, key: "persist.x", value: "1" }, { timeoutMs }).then(
    () => {
      throw new Error("the call did not fail");
    },
    (e: unknown) => ConnectError.from(e),
  );
}

/**
 * The call, and this process's longest event-loop stall while it ran (ms). Client and server share
 * the loop: a stall past DEADLINE_GRACE_MS makes the server's answer at the deadline and the
 * client's give-up due at once, and the client's timer may run first.
 */
async function setpropTimingStalls(url: string, timeoutMs: number): Promise<{ err: ConnectError; stallMs: number }> {
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  try {
    return { err: await setprop(url, timeoutMs), stallMs: loop.max / 1e6 };
  } finally {
    loop.disable();
  }
}

describe("the CLI's deadline", () => {
  it("reports the coordinator's timeout given at the deadline, with the action id", async () => {
    const url = await coordinator(async (ctx) => {
      await deadlinePassed(ctx);
      throw actionError(Errors.COMMAND_TIMEOUT, "setprop did not finish by its deadline", { dispatched: true, ambiguous: true, actionId: "act-1", agentId: "agent-1" });
    });
    // Until a call that the machine did not stall past half the grace: that one must report the
    // coordinator's answer. A stalled one may also have given up first, as a stalled CLI rightly does.
    for (;;) {
      const { err, stallMs } = await setpropTimingStalls(url, 300);
      const report = toErrorReport(err);
      if (stallMs < DEADLINE_GRACE_MS / 2) {
        expect(report).toMatchObject({ code: "COMMAND_TIMEOUT", dispatched: true, ambiguous: true, actionId: "act-1" });
        return;
      }
      expect(report).toMatchObject(
        report.code === "DEADLINE_EXCEEDED" ? { field: "timeout", dispatched: null, ambiguous: true } : { code: "COMMAND_TIMEOUT", dispatched: true, ambiguous: true, actionId: "act-1" },
      );
    }
  });

  it("gives up DEADLINE_GRACE_MS after the deadline with no answer: DEADLINE_EXCEEDED, outcome unknown", async () => {
    let passed = false;
    const url = await coordinator(async (ctx) => {
      await deadlinePassed(ctx);
      passed = true;
      return new Promise<never>(() => {});
    });
    const started = performance.now();
    const report = toErrorReport(await setprop(url, 300));
    expect(passed).toBe(true);
    expect(performance.now() - started).toBeGreaterThanOrEqual(300 + DEADLINE_GRACE_MS - 1);
    expect(report).toMatchObject({ code: "DEADLINE_EXCEEDED", field: "timeout", dispatched: null, ambiguous: true });
    expect(report.message).toContain("farm device ownership status --device S1");
  });
});
