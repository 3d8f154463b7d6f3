/**
 * The deadline a farm client sends and the one it keeps: it sends T and
 * listens until T + DEADLINE_GRACE_MS, so an answer the server sends at its
 * deadline (or a little after, on a loaded host) still arrives. A real
 * HTTP/2 Connect server in this process; the server's deadline is the
 * event the tests wait on.
 */
import { createServer, type Http2Server, type ServerHttp2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { Code, ConnectError, createClient, type ConnectRouter, type HandlerContext } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { DeviceService } from "./gen/farm/v1/device_service_pb.js";
import { actionError, Errors, toErrorReport } from "./errors.js";
import { DEADLINE_GRACE_MS } from "./deadline.js";
import { farmTransport } from "./farm-transport.js";

let server: Http2Server | undefined;
const sessions: ServerHttp2Session[] = [];
afterEach(async () => {
  for (const s of sessions.splice(0)) s.destroy();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  server = undefined;
});

/** Serves DeviceService's SetProperty (a device change) and GetOwnership (a read) with the given handler. */
async function serve(handler: (ctx: HandlerContext) => Promise<never>): Promise<string> {
  server = createServer(
    connectNodeAdapter({
      routes: (router: ConnectRouter) => {
        router.service(DeviceService, { setProperty: (_req, ctx) => handler(ctx), getOwnership: (_req, ctx) => handler(ctx) });
      },
    }),
  );
  server.on("session", (s) => sessions.push(s));
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Resolves when the server-side deadline (the one the client sent) passes. */
function deadlinePassed(ctx: HandlerContext): Promise<void> {
  return new Promise((resolve) => (ctx.signal.aborted ? resolve() : ctx.signal.addEventListener("abort", () => resolve(), { once: true })));
}

const TIMEOUT_MS = 300;

describe("a farm client's deadline", () => {
  it("sends the caller's timeout and still hears an answer given at that deadline, with its action id", async () => {
    let sentMs: number | undefined;
    const url = await serve(async (ctx) => {
      sentMs = ctx.timeoutMs();
      await deadlinePassed(ctx);
      // Answered only once the deadline the client sent has passed.
      throw actionError(Errors.COMMAND_TIMEOUT, "set did not finish by its deadline; the outcome of action act-late is unknown", { dispatched: null, ambiguous: true, actionId: "act-late", agentId: "agent-1" });
    });
    const client = createClient(DeviceService, farmTransport({ url, token: "t" }));
    const err = await client.setProperty({ target: { serial: "S1" }, key: "persist.x", value: "1" }, { timeoutMs: TIMEOUT_MS }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(sentMs).toBeLessThanOrEqual(TIMEOUT_MS);
    expect(toErrorReport(err)).toMatchObject({ code: "COMMAND_TIMEOUT", dispatched: null, ambiguous: true, actionId: "act-late", agentId: "agent-1" });
  });

  it("gives up DEADLINE_GRACE_MS after the deadline it sent; a device change's outcome is then unknown and the error says where to look", async () => {
    let serverDeadline: (() => void) | undefined;
    const passed = new Promise<void>((resolve) => (serverDeadline = resolve));
    const url = await serve(async (ctx) => {
      await deadlinePassed(ctx);
      serverDeadline?.();
      // Never answers: only the client's own give-up ends the call.
      return new Promise<never>(() => {});
    });
    const client = createClient(DeviceService, farmTransport({ url, token: "t" }));
    const started = performance.now();
    let settled = false;
    const call = client.setProperty({ target: { serial: "S1" }, key: "persist.x", value: "1" }, { timeoutMs: TIMEOUT_MS }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    ).finally(() => (settled = true));
    await passed;
    expect(settled).toBe(false);
    const err = await call;
    expect(performance.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS + DEADLINE_GRACE_MS - 1);
    expect(err?.code).toBe(Code.DeadlineExceeded);
    const report = toErrorReport(err);
    expect(report).toMatchObject({ code: "DEADLINE_EXCEEDED", dispatched: null, ambiguous: true, field: "timeout" });
    expect(report.message).toContain("farm device ownership status --device S1");
  });

  it("gives up the same way on a read, which has no outcome to report", async () => {
    const url = await serve(async () => new Promise<never>(() => {}));
    const client = createClient(DeviceService, farmTransport({ url, token: "t" }));
    const err = await client.getOwnership({ target: { serial: "S1" } }, { timeoutMs: TIMEOUT_MS }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    const report = toErrorReport(err);
    expect(report).toMatchObject({ code: "DEADLINE_EXCEEDED" });
    expect(report.dispatched).toBeUndefined();
  });
});
