import { actions } from "../db/schema.js";
import type { AgentDb } from "../db/open-agent-db.js";
import type { OwnershipJournal } from "./ownership-journal.js";

/**
 * Moves entries of the journal older agents kept in their data dir into the
 * host journal (once: they are deleted from the data dir after the copy is
 * committed), so an upgrade loses no unresolved action.
 */
export function importLegacyJournal(agentDb: { db: AgentDb }, journal: OwnershipJournal, agentId: string): number {
  const rows = agentDb.db.select().from(actions).all();
  if (rows.length === 0) return 0;
  const n = journal.importLegacy(rows, agentId);
  agentDb.db.delete(actions).run();
  return n;
}
