/**
 * The dashboard's state against a real coordinator (in process, its own
 * SQLite) with an in-process agent reporting phones: what it reads when the
 * watch stream is ready, how each event changes one entry and which topic
 * and key it announces, and how device pages and events meet at the edge of
 * what has been read. Small pages (2 rows) so the edge is reached with five
 * phones.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createLogger } from "@farm/shared/log";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { SessionSchema, SessionStatus } from "@farm/shared/gen/farm/v1/session_service_pb";
import { TunnelSchema } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { startCoordinator, type RunningCoordinator } from "@farm/coordinator/coordinator";
import { attachInProcessAgent, tokenTransport } from "@farm/test/support/in-process-agent";
import { createApi } from "./api-clients.js";
import { LiveState, newerSession, newerTunnel, type Topic } from "./live-state.js";

const SERIALS = ["PHONE001", "PHONE002", "PHONE003", "PHONE004", "PHONE005"];

let dir: string;
let coordinator: RunningCoordinator;
let admin: string;
let agent: { report(phones: { serial: string; state?: string }[]): void };
const stop = new AbortController();

/** Resolves with the key of the first `topic` announcement for which `until` holds. */
function announced(state: LiveState, topic: Topic, until: (key?: string) => boolean): Promise<string | undefined> {
  return new Promise((resolve) => {
    const off = state.on(topic, (key) => {
      if (!until(key)) return;
      off();
      resolve(key);
    });
  });
}

/** A state that follows the coordinator until the test ends, once it is live. */
async function liveState(pageSize?: number): Promise<{ state: LiveState; end: AbortController }> {
  const state = new LiveState(createApi(tokenTransport(coordinator.url, admin)), undefined, pageSize === undefined ? {} : { pageSize });
  const end = new AbortController();
  const live = announced(state, "connection", () => state.connection === "live");
  void state.run(end.signal, () => undefined);
  await live;
  return { state, end };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "farm-live-state-"));
  coordinator = await startCoordinator({ listen: { host: "127.0.0.1", port: 0 }, dataDir: join(dir, "data"), dashboardDir: null, log: createLogger({ level: "error" }) });
  admin = (await coordinator.tokens.create("root", "user", "admin")).secret;
  const agentToken = (await coordinator.tokens.create("lab-1", "agent")).secret;
  agent = await attachInProcessAgent({ baseUrl: coordinator.url, agentToken, agentId: "lab-1", routes: [], phones: SERIALS.map((serial) => ({ serial })), signal: stop.signal });
});

afterAll(async () => {
  stop.abort();
  await coordinator?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("newer copies", () => {
  const session = (status: SessionStatus, stepCount: number, failedStepCount: number) => create(SessionSchema, { sessionId: "s1", status, stepCount, failedStepCount });

  it("keeps a session ended and its counts at their highest, whichever copy arrives last", () => {
    const ended = session(SessionStatus.PASSED, 5, 1);
    const staleRead = session(SessionStatus.RUNNING, 3, 0);
    expect(newerSession(ended, staleRead)).toMatchObject({ status: SessionStatus.PASSED, stepCount: 5, failedStepCount: 1 });
    expect(newerSession(staleRead, ended)).toMatchObject({ status: SessionStatus.PASSED, stepCount: 5, failedStepCount: 1 });
    expect(newerSession(undefined, staleRead)).toBe(staleRead);
  });

  it("keeps the copy of a tunnel that has moved more bytes", () => {
    const older = create(TunnelSchema, { tunnelId: "t1", bytesToDevice: 10n, bytesFromDevice: 5n });
    const newer = create(TunnelSchema, { tunnelId: "t1", bytesToDevice: 10n, bytesFromDevice: 900n });
    expect(newerTunnel(newer, older)).toBe(newer);
    expect(newerTunnel(older, newer)).toBe(newer);
  });
});

describe("a live state", () => {
  it("reads every list once the stream is ready, grouping devices by phone", async () => {
    const { state, end } = await liveState();
    try {
      expect(state.loaded).toBe(true);
      expect([...state.agents.keys()]).toEqual(["lab-1"]);
      expect([...state.devices.values()].map((d) => d.serial).sort()).toEqual(SERIALS);
      expect(state.nextPage.devices).toBe("");
      expect(state.phone("pd-PHONE003").map((d) => d.serial)).toEqual(["PHONE003"]);
    } finally {
      end.abort();
    }
  });

  it("applies a lease, its labels and its end as events, each announced with the phone it is about", async () => {
    const { state, end } = await liveState();
    const leases = createClient(LeaseService, tokenTransport(coordinator.url, admin));
    try {
      const granted = announced(state, "leases", (key) => key === "pd-PHONE002" && state.leases.has("pd-PHONE002"));
      const { token, lease } = await leases.acquireLease({ selector: { serial: "PHONE002" }, ttlMs: 60_000 });
      await granted;
      expect(state.leases.get("pd-PHONE002")?.leaseId).toBe(lease?.leaseId);

      const labelled = announced(state, "labels", (key) => key === "pd-PHONE002");
      await leases.setDeviceLabels({ serial: "PHONE002", labels: { team: "payments" } });
      await labelled;
      expect(state.labels.get("pd-PHONE002")).toEqual({ team: "payments" });

      const ended = announced(state, "leases", (key) => key === "pd-PHONE002" && !state.leases.has("pd-PHONE002"));
      await leases.releaseLease({ token });
      await ended;
      expect(state.leases.size).toBe(0);
    } finally {
      end.abort();
    }
  });

  it("holds devices a page at a time: an event after the last row read waits for its page, and the next page neither repeats nor misses a row", async () => {
    const { state, end } = await liveState(2);
    const offline = (...serials: string[]) => SERIALS.map((serial) => ({ serial, state: serials.includes(serial) ? "offline" : "device" }));
    try {
      expect([...state.devices.values()].map((d) => d.serial)).toEqual(["PHONE001", "PHONE002"]);
      expect(state.nextPage.devices).not.toBe("");

      // PHONE004 (after the last row read) goes offline first, then PHONE001 (before it): when PHONE001's event is here, PHONE004's was applied.
      const inside = announced(state, "devices", (key) => key === "pd-PHONE001" && state.phone("pd-PHONE001")[0]?.state === "offline");
      agent.report(offline("PHONE004"));
      agent.report(offline("PHONE004", "PHONE001"));
      await inside;
      expect([...state.devices.values()].map((d) => d.serial)).toEqual(["PHONE001", "PHONE002"]);

      await state.loadMore("devices");
      await state.loadMore("devices");
      expect([...state.devices.values()].map((d) => d.serial)).toEqual(SERIALS);
      expect(state.phone("pd-PHONE004")[0]?.state).toBe("offline");
      expect(state.nextPage.devices).toBe("");

      // With every page read, an event about any row applies at once.
      const back = announced(state, "devices", (key) => key === "pd-PHONE004" && state.phone("pd-PHONE004")[0]?.state === "device");
      agent.report(offline("PHONE001"));
      await back;
    } finally {
      agent.report(SERIALS.map((serial) => ({ serial })));
      end.abort();
    }
  });

  it("reads the device list again from its start with another state filter", async () => {
    const { state, end } = await liveState();
    const first = announced(state, "devices", (key) => key === "pd-PHONE003");
    agent.report(SERIALS.map((serial) => ({ serial, state: serial === "PHONE003" ? "offline" : "device" })));
    try {
      await first;
      await state.setDeviceState("offline");
      expect([...state.devices.values()].map((d) => d.serial)).toEqual(["PHONE003"]);
      // Back online, it leaves the filtered list.
      const left = announced(state, "devices", (key) => key === "pd-PHONE003" && state.devices.size === 0);
      agent.report(SERIALS.map((serial) => ({ serial })));
      await left;
      await state.setDeviceState("");
      expect(state.devices.size).toBe(SERIALS.length);
    } finally {
      agent.report(SERIALS.map((serial) => ({ serial })));
      end.abort();
    }
  });
});
