import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { writePrivateFile } from "@farm/shared/secure-file";

export interface AgentIdentity {
  id: string;
  createdAt: string;
}

/**
 * The agent's id, created on first start and kept in its data dir, so the
 * coordinator recognises the same host across restarts and reconnects.
 */
export async function loadAgentIdentity(dataDir: string): Promise<AgentIdentity> {
  const file = join(dataDir, "agent.json");
  try {
    const parsed = JSON.parse(await readFile(file, "utf8")) as Partial<AgentIdentity>;
    if (typeof parsed.id === "string" && parsed.id !== "" && typeof parsed.createdAt === "string") {
      return { id: parsed.id, createdAt: parsed.createdAt };
    }
    throw new Error(`${file} has no valid "id"; remove it to let the agent create a new identity`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  const identity: AgentIdentity = { id: randomUUID(), createdAt: new Date().toISOString() };
  await writePrivateFile(file, JSON.stringify(identity, null, 2) + "\n");
  return identity;
}
