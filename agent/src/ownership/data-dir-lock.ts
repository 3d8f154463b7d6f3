import { join } from "node:path";
import { Errors, farmError } from "@farm/shared/errors";
import { OsLock } from "./os-lock.js";

/**
 * Only one agent process owns a data dir at a time. The lock is held by the
 * OS for the life of the process; a second agent refuses to start and names
 * the owner. A dead owner's lock is gone with it, so nothing is ever taken
 * over on a guess (a failed probe, an old pid file).
 */
export function lockDataDir(dataDir: string): OsLock {
  const file = join(dataDir, "agent.lock");
  const lock = OsLock.tryAcquire(file, { role: "agent", startedAt: new Date().toISOString() });
  if (lock) return lock;
  const owner = OsLock.holder(file);
  throw farmError(
    Errors.AGENT_DATA_DIR_LOCKED,
    `data dir ${dataDir} is owned by a running agent${owner ? ` (pid ${String(owner["pid"])}, started ${String(owner["startedAt"])})` : ""}; stop it or use another --data-dir`,
    "data-dir",
  );
}
