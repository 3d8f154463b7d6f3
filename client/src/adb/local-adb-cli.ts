import { execFile } from "node:child_process";
import { Errors } from "@farm/shared/error-codes";
import { FarmError } from "../farm-error.js";

/** The user's own adb: the one on PATH, talking to their adb server (-P when a port was given). */
export interface LocalAdb {
  /** --adb-port / ANDROID_ADB_SERVER_PORT; undefined: adb's default (5037). */
  serverPort: number | undefined;
  /**
   * ADB_SERVER_SOCKET for this adb (a per-user server on a private socket):
   * undefined inherits this process's; null runs adb without it (the
   * server a tunnel was connected to had none).
   */
  serverSocket?: string | null;
  /** The environment adb runs with (the CLI run's own, which main was given); undefined: this process's. */
  env?: NodeJS.ProcessEnv | undefined;
}

/** The ADB_SERVER_SOCKET a tunnel's adb server was reached by, to be recorded with it. */
export function serverSocketOf(env: NodeJS.ProcessEnv): string | null {
  return env["ADB_SERVER_SOCKET"] || null;
}

interface AdbOutput {
  code: number;
  text: string;
}

function runLocalAdb(adb: LocalAdb, args: readonly string[], timeoutMs: number): Promise<AdbOutput> {
  const argv = [...(adb.serverPort === undefined ? [] : ["-P", String(adb.serverPort)]), ...args];
  return new Promise((resolve, reject) => {
    const base = adb.env ?? process.env;
    const env = adb.serverSocket === undefined ? base : withServerSocket(base, adb.serverSocket);
    const child = execFile("adb", argv, { timeout: timeoutMs, killSignal: "SIGKILL", env }, (error, stdout, stderr) => {
      const text = `${stdout}${stderr}`.trim();
      if (error && typeof error.code !== "number") {
        const missing = (error as NodeJS.ErrnoException).code === "ENOENT";
        reject(new FarmError(Errors.ADB_REFUSED, missing ? "adb is not on PATH: install the Android platform tools" : `adb ${args.join(" ")} did not finish: ${error.message}`, "adb"));
        return;
      }
      resolve({ code: typeof error?.code === "number" ? error.code : 0, text });
    });
    child.stdin?.end();
  });
}

/**
 * `adb connect SERIAL`. adb 29 answers once the endpoint's CNXN arrived
 * ("connected to") or after its own 10 s wait ("failed to connect"), with
 * exit status 0 either way, so the words decide.
 */
export async function adbConnect(adb: LocalAdb, serial: string): Promise<void> {
  const out = await runLocalAdb(adb, ["connect", serial], 30_000);
  if (/^(connected to|already connected to) /m.test(out.text)) return;
  throw new FarmError(Errors.ADB_REFUSED, `adb connect ${serial} failed: ${out.text || `exit ${out.code}`}`, "adb");
}

function withServerSocket(env: NodeJS.ProcessEnv, socket: string | null): NodeJS.ProcessEnv {
  const out = { ...env };
  if (socket === null) delete out["ADB_SERVER_SOCKET"];
  else out["ADB_SERVER_SOCKET"] = socket;
  return out;
}

/** What `adb disconnect SERIAL` did: took it out, found no such serial, or failed (why). */
export type DisconnectOutcome = { kind: "disconnected" } | { kind: "absent" } | { kind: "failed"; why: string };

/** `adb disconnect SERIAL`, telling a serial taken out from one the server did not have. Never throws: it is cleanup. */
export async function adbDisconnectOutcome(adb: LocalAdb, serial: string): Promise<DisconnectOutcome> {
  try {
    const out = await runLocalAdb(adb, ["disconnect", serial], 10_000);
    if (/^disconnected /m.test(out.text)) return { kind: "disconnected" };
    if (/no such device/m.test(out.text)) return { kind: "absent" };
    return { kind: "failed", why: out.text || `exit ${out.code}` };
  } catch (err) {
    return { kind: "failed", why: (err as Error).message };
  }
}

/** `adb disconnect SERIAL`; "no such device" counts as done. Never throws: it is cleanup. */
export async function adbDisconnect(adb: LocalAdb, serial: string): Promise<string | undefined> {
  const o = await adbDisconnectOutcome(adb, serial);
  return o.kind === "failed" ? o.why : undefined;
}
