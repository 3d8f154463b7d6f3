/**
 * The deadline's last word, across every hop: a farm client (the shared
 * transport) → a Connect server routing the call as the coordinator does
 * (AttachSession, the caller's deadline from its timeout) → the agent's
 * dispatcher. The agent's verdict is held until the caller's deadline has
 * passed; the caller still hears it, with its action id.
 */
import { createServer, type Http2Server, type ServerHttp2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ConnectError, createClient, type ConnectRouter, type ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { actionError, Errors, toErrorReport } from "@farm/shared/errors";
import { createLogger } from "@farm/shared/log";
import { farmTransport } from "@farm/shared/farm-transport";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { callDispatcher } from "@farm/agent/rpc/call-dispatch";
import type { ServiceRoute } from "@farm/agent/rpc/routes";
import { AttachSession } from "@farm/coordinator/routing/agent-session";

let server: Http2Server | undefined;
const sessions: ServerHttp2Session[] = [];
afterEach(async () => {
  for (const s of sessions.splice(0)) s.destroy();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  server = undefined;
});

/** A coordinator's routing of SetProperty to one agent over its stream, the agent answering with `impl`. */
async function coordinator(impl: Partial<ServiceImpl<typeof DeviceService>>, callerDeadline: (ms: number) => void): Promise<string> {
  const dispatch = callDispatcher({
    routes: [{ service: DeviceService, impl } as unknown as ServiceRoute],
    drainReason: () => "",
    log: createLogger({ level: "error", write: () => {} }),
    hostPaths: [],
  });
  server = createServer(
    connectNodeAdapter({
      routes: (router: ConnectRouter) => {
        router.service(DeviceService, {
          async setProperty(req, ctx) {
            const deadline = Date.now() + (ctx.timeoutMs() ?? 30_000);
            callerDeadline(deadline);
            const session = new AttachSession("agent-token");
            const answer = session.call(DeviceService.method.setProperty, req, { tokenName: "alice", admin: false }, deadline);
            for await (const msg of session.outgoing) {
              if (msg.kind.case !== "call") continue;
              session.resolve(await dispatch(msg.kind.value));
              break;
            }
            return answer;
          },
        });
      },
    }),
  );
  server.on("session", (s) => sessions.push(s));
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe("a device change answered after the caller's deadline", () => {
  it("reaches the caller with the agent's verdict and action id", async () => {
    let deadline = 0;
    const url = await coordinator(
      {
        async setProperty() {
          // The agent's verdict comes only once the caller's deadline has passed.
          await new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now()) + 1));
          throw actionError(Errors.COMMAND_TIMEOUT, "setprop did not finish by its deadline; the outcome of action act-late is unknown", { dispatched: null, ambiguous: true, actionId: "act-late", agentId: "agent-1" });
        },
      },
      (ms) => (deadline = ms),
    );
    const client = createClient(DeviceService, farmTransport({ url, token: "t" }));
    const err = await client.setProperty({ target: { serial: "S1" }, key: "persist.x", value: "1" }, { timeoutMs: 300 }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(deadline).toBeGreaterThan(0);
    expect(toErrorReport(err)).toMatchObject({ code: "COMMAND_TIMEOUT", dispatched: null, ambiguous: true, actionId: "act-late", agentId: "agent-1" });
  });
});
