/**
 * Watch streams across coordinator replicas: two `farm coordinator`
 * processes on one PostgreSQL database, an agent with a simulated phone on
 * replica 0, a Watch stream on replica 1. What the CLI does through replica
 * 0 (a leased shell command, a recorded session and its step, an evidence
 * capture) reaches the watcher on replica 1 as it would a watcher on 0.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ActivityService } from "@farm/shared/gen/farm/v1/activity_service_pb";
import { WatchService, type WatchResponse } from "@farm/shared/gen/farm/v1/watch_service_pb";
import { bearer } from "../support/fake-agent.js";
import { farm, type CliResult } from "../support/farm-process.js";
import { startReplicaLab, type ReplicaLab } from "../support/replica-lab.js";

/** Waits for events, not time: each resolves on the first message it matches, seen before or after it was asked for. */
const WAIT_MS = 15_000;

let lab: ReplicaLab | undefined;
let serial = "";
let admin = "";
/** Admin CLI environment per replica. */
let envs: NodeJS.ProcessEnv[] = [];

const urlOf = (i: number) => lab?.urlOf(i) ?? "";
const transportOf = (i: number) => createGrpcTransport({ baseUrl: urlOf(i), interceptors: [bearer(admin)] });

async function run(args: string[], env: NodeJS.ProcessEnv): Promise<CliResult> {
  const r = await farm(args, env);
  expect(r.code, `${args.join(" ")}: ${r.stdout}${r.stderr}`).toBe(0);
  return r;
}

/** A Watch stream on one replica, with what it has sent so far. */
function watch(replica: number) {
  const stop = new AbortController();
  const got: WatchResponse[] = [];
  const waiters = new Set<{ match: (m: WatchResponse) => boolean; resolve: (m: WatchResponse) => void }>();
  let failed: Error | undefined;
  const done = (async () => {
    for await (const m of createClient(WatchService, transportOf(replica)).watch({}, { signal: stop.signal })) {
      got.push(m);
      for (const w of waiters) if (w.match(m)) w.resolve(m);
    }
  })().catch((err: unknown) => {
    if (!stop.signal.aborted) failed = err as Error;
  });
  return {
    got,
    /** The first message (already sent or still to come) that `match` accepts. */
    next(what: string, match: (m: WatchResponse) => boolean): Promise<WatchResponse> {
      const already = got.find(match);
      if (already) return Promise.resolve(already);
      return new Promise((resolve, reject) => {
        const w = {
          match,
          resolve: (m: WatchResponse) => {
            clearTimeout(timer);
            waiters.delete(w);
            resolve(m);
          },
        };
        const timer = setTimeout(() => {
          waiters.delete(w);
          reject(new Error(`replica ${replica}'s Watch did not send ${what} within ${WAIT_MS} ms${failed ? ` (the stream failed: ${failed.message})` : ""}; it sent: ${got.map((x) => x.kind.case).join(", ")}`));
        }, WAIT_MS);
        waiters.add(w);
      });
    },
    async close() {
      stop.abort();
      await done;
    },
  };
}

beforeAll(async () => {
  // One data dir, as a shared mount would be; one lab host, its agent attached to replica 0.
  lab = await startReplicaLab("replica-watch", { sharedDataDir: true, serialno: "RWATCH01" });
  ({ serial, admin, envs } = lab);
}, 120_000);

afterAll(async () => {
  await lab?.stop();
});

describe("Watch across replicas", () => {
  it("sends a watcher on replica 1 the activity, session, step and evidence made through replica 0", async () => {
    const watcher = watch(1);
    try {
      await watcher.next("ready", (m) => m.kind.case === "ready");

      // An evidence capture, then a session under a lease and one step in it (a shell command, also an activity entry).
      const captured = await run(["evidence", "capture", "--device", serial, "--label", "replica-watch"], envs[0]!);
      const evidenceId = String(captured.json["evidenceId"]);
      expect(evidenceId).toMatch(/^[0-9a-f-]{36}$/);
      const lease = (await run(["lease", "acquire", "--device", serial, "--ttl", "5m"], envs[0]!)).json["lease"] as { token: string; leaseId: string; physicalId: string };
      const leaseEnv = { ...envs[0], FARM_LEASE: lease.token };
      const session = (await run(["session", "start", "--device", serial, "--name", "across replicas"], leaseEnv)).json["session"] as { sessionId: string };
      await run(["shell", "--device", serial, "--", "echo", "replica-watch"], { ...leaseEnv, FARM_SESSION: session.sessionId });

      const bundle = await watcher.next(`evidence ${evidenceId}`, (m) => m.kind.case === "evidence" && m.kind.value.evidenceId === evidenceId);
      expect(bundle.kind.value).toMatchObject({ evidenceId, serial, physicalId: lease.physicalId, agentName: "lab-0", label: "replica-watch", status: "complete" });

      const started = await watcher.next(`session ${session.sessionId}`, (m) => m.kind.case === "session" && m.kind.value.sessionId === session.sessionId);
      expect(started.kind.value).toMatchObject({ sessionId: session.sessionId, name: "across replicas", serial, physicalId: lease.physicalId, leaseId: lease.leaseId, owner: "admin", agentName: "lab-0" });

      const step = await watcher.next(`step 1 of ${session.sessionId}`, (m) => m.kind.case === "sessionStep" && m.kind.value.sessionId === session.sessionId && m.kind.value.sequence === 1);
      expect(step.kind.value).toMatchObject({ sessionId: session.sessionId, sequence: 1, action: "shell", requestedBy: "admin", result: { ok: true } });
      expect(JSON.stringify(step.kind.case === "sessionStep" && step.kind.value.arguments)).toContain("replica-watch");
      // The session came before its step.
      expect(watcher.got.indexOf(started)).toBeLessThan(watcher.got.indexOf(step));

      // The shell's activity entry, exactly as replica 0 lists it.
      const listed = (await createClient(ActivityService, transportOf(0)).listActivity({ serial, pageSize: 20 })).entries.find((e) => e.leaseId === lease.leaseId && /shell/i.test(e.command));
      expect(listed, "replica 0 lists the shell's activity").toBeDefined();
      const entry = await watcher.next(`activity ${listed!.id}`, (m) => m.kind.case === "activity" && m.kind.value.id === listed!.id);
      expect(entry.kind.value).toEqual(listed);
      expect(entry.kind.value).toMatchObject({ serial, leaseId: lease.leaseId, physicalId: lease.physicalId, caller: "admin", outcome: "ok" });

      // Ending the session: the watcher sees it ended.
      await run(["session", "end", "--status", "passed"], { ...leaseEnv, FARM_SESSION: session.sessionId });
      const ended = await watcher.next(`session ${session.sessionId} ended`, (m) => m.kind.case === "session" && m.kind.value.sessionId === session.sessionId && m.kind.value.endTime !== undefined);
      expect(ended.kind.value).toMatchObject({ sessionId: session.sessionId, stepCount: 1 });
      await run(["lease", "release"], leaseEnv);
    } finally {
      await watcher.close();
    }
  }, 90_000);
});
