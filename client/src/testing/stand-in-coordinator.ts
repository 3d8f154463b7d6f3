import { createServer, type ServerHttp2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { connect, FarmError, type FarmClient, type FarmClientOptions } from "../index.js";

/** A Connect server in this process standing in for the coordinator, and a FarmClient connected to it. */
export interface StandInCoordinator {
  readonly farm: FarmClient;
  /** The HTTP/2 sessions clients opened to it (one per connection). */
  readonly sessions: readonly ServerHttp2Session[];
  /** The coordinator goes away (its server and every connection to it); the client stays. */
  stopServing(): Promise<void>;
  close(): Promise<void>;
}

/** Serves `routes` on a free loopback port; the client takes nothing from this machine's environment or config file, only `options`. */
export async function startStandInCoordinator(routes: (router: ConnectRouter) => void, options: Omit<FarmClientOptions, "coordinator" | "token" | "env"> = {}): Promise<StandInCoordinator> {
  const sessions: ServerHttp2Session[] = [];
  const server = createServer(connectNodeAdapter({ routes }));
  server.on("session", (s) => sessions.push(s));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const farm = await connect({ ...options, coordinator: url, token: "farmu_lib", env: { FARM_HOME: join("/nonexistent", "farm-home"), FARM_CONFIG: "/nonexistent/config.json" } });
  let serving: Promise<unknown> | undefined;
  const stopServing = () => {
    serving ??= new Promise((resolve) => {
      server.close(resolve);
      for (const s of sessions) s.destroy();
    });
    return serving.then(() => undefined);
  };
  return {
    farm,
    sessions,
    stopServing,
    async close() {
      farm.close();
      await stopServing();
    },
  };
}

/** The FarmError a call ends with; anything else (or success) is thrown, so the test fails. */
export async function farmFailure(p: Promise<unknown>): Promise<FarmError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  if (err instanceof FarmError) return err;
  throw new Error(`expected a FarmError, got ${err === undefined ? "success" : String(err)}`);
}
