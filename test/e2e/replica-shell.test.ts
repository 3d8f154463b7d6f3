/**
 * The interactive shell across coordinator replicas: two `farm coordinator`
 * processes on one PostgreSQL database, an agent attached to replica 0, the
 * CLI in a pseudo-terminal pointed at replica 1. The caller's stream lands
 * on replica 1, the agent's shell stream on replica 0, and the session is
 * carried between them (ReplicaService.RelayShell).
 */
import { randomBytes } from "node:crypto";
import { spawn as ptySpawn, type IPty } from "node-pty";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { farm, farmBin, waitFor, type FarmProcess } from "../support/farm-process.js";
import { startReplicaLab, type ReplicaLab } from "../support/replica-lab.js";

interface ActionRow {
  actionId: string;
  kind: string;
  state: string;
}

let lab: ReplicaLab | undefined;
let serial = "";
let replicas: FarmProcess[] = [];
/** Admin CLI environment per replica. */
let envs: NodeJS.ProcessEnv[] = [];
const terminals: IPty[] = [];

/** The phone's interactive-shell actions in the agent's journal, read through replica 1. */
async function shellActions(): Promise<ActionRow[]> {
  const status = await farm(["device", "ownership", "status", "--device", serial], envs[1]);
  const recent = ((status.json["ownership"] ?? { recent: [] }) as { recent: ActionRow[] }).recent;
  return recent.filter((a) => a.kind === "interactive-shell");
}

/** `farm shell` without a command, in a pseudo-terminal, through replica 1 under a lease. */
function openTerminal(lease: string) {
  const term = ptySpawn(process.execPath, [farmBin, "shell", "--device", serial], {
    cols: 100,
    rows: 30,
    env: { ...process.env, ...envs[1], FARM_OUTPUT: "json", FARM_LEASE: lease, TERM: "xterm" } as Record<string, string>,
  });
  terminals.push(term);
  let screen = "";
  term.onData((d) => (screen += d));
  const exit = new Promise<number>((resolve) => term.onExit(({ exitCode }) => resolve(exitCode)));
  const seen = (text: string) => waitFor(`"${text}" on the terminal`, () => (screen.includes(text) ? true : undefined), { intervalMs: 20 });
  return { term, exit, seen, screen: () => screen };
}

async function acquire(): Promise<string> {
  const lease = await farm(["lease", "acquire", "--device", serial, "--ttl", "5m"], envs[1]);
  expect(lease.json, lease.stderr).toMatchObject({ ok: true });
  return String((lease.json["lease"] as { token: string }).token);
}

beforeAll(async () => {
  // Replica 1 reaches the phone only through replica 0.
  lab = await startReplicaLab("replica-shell", { sharedDataDir: true, agentName: "lab" });
  ({ serial, replicas, envs } = lab);
}, 120_000);

afterAll(async () => {
  for (const t of terminals) t.kill("SIGKILL");
  await lab?.stop();
});

describe("interactive shell across coordinator replicas", () => {
  it("relays typing, output and the exit code between the caller's replica and the agent's", async () => {
    const lease = await acquire();
    const { term, exit, seen } = openTerminal(lease);
    await seen("$ ");
    // The terminal echoes what is typed; only the device shell's output expands $M.
    const marker = randomBytes(6).toString("hex");
    term.write(`M=${marker}; echo hello-$M\r`);
    await seen(`hello-${marker}`);
    term.write("stty size\r");
    await seen("30 100");
    term.write("exit 7\r");
    expect(await exit).toBe(7);
    // Recorded where the call landed (replica 1), in the shared database.
    const entries = (await farm(["activity", "--device", serial], envs[1])).json["entries"] as { command: string; outcome: string }[];
    expect(entries.some((e) => e.command === "openShell" && e.outcome === "ok")).toBe(true);
    expect((await shellActions()).every((a) => a.state === "settled")).toBe(true);
    expect((await farm(["lease", "release"], { ...envs[1], FARM_LEASE: lease })).code).toBe(0);
  });

  it("ends the agent's session when the caller hangs up", async () => {
    const before = new Set((await shellActions()).map((a) => a.actionId));
    const lease = await acquire();
    const { term, seen } = openTerminal(lease);
    await seen("$ ");
    const started = await waitFor("the session's action in the agent's journal", async () => (await shellActions()).find((a) => !before.has(a.actionId)));
    expect(started.state).not.toBe("settled");
    // The caller vanishes without a word: replica 1 hangs up, replica 0 passes it on, the agent ends the shell.
    term.kill("SIGKILL");
    await waitFor("the session settled on the agent", async () => {
      const now = (await shellActions()).find((a) => a.actionId === started.actionId);
      return now?.state === "settled" ? now : undefined;
    });
    // The device lock went with it: the phone takes a command again, through either replica.
    const r = await farm(["shell", "--device", serial, "--", "echo", "after-hangup"], { ...envs[1], FARM_LEASE: lease });
    expect(r.json, r.stderr).toMatchObject({ ok: true, exitCode: 0 });
    expect(String(r.json["stdout"])).toContain("after-hangup");
    expect((await farm(["lease", "release"], { ...envs[1], FARM_LEASE: lease })).code).toBe(0);
  });

  it("ends the caller's shell with an error when the replica holding the agent is killed mid-session", async () => {
    const lease = await acquire();
    const { term, exit, seen, screen } = openTerminal(lease);
    await seen("$ ");
    term.write("S=still; echo $S-here\r");
    await seen("still-here");
    (replicas[0] as FarmProcess).kill("SIGKILL");
    // AGENT_OFFLINE: the farm could not serve it (69), not what the command did.
    expect(await exit).toBe(69);
    const line = /\{"ok":false.*\}/.exec(screen());
    expect(line, screen()).not.toBeNull();
    const failure = JSON.parse((line as RegExpExecArray)[0]) as Record<string, unknown>;
    expect(failure).toMatchObject({ ok: false, code: "AGENT_OFFLINE" });
    expect(String(failure["message"])).toContain("mid-session");
  }, 30_000);
});
