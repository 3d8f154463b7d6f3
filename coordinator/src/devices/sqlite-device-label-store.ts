import { and, eq } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { deviceLabels } from "../db/schema.js";
import type { DeviceLabelStore, LabelRow } from "./device-label-store.js";

/** Device labels in the coordinator's SQLite database. */
export class SqliteDeviceLabelStore implements DeviceLabelStore {
  constructor(private readonly db: CoordinatorDb) {}

  async all(): Promise<LabelRow[]> {
    return this.db.select().from(deviceLabels).all();
  }

  async of(physicalId: string): Promise<LabelRow[]> {
    return this.db.select().from(deviceLabels).where(eq(deviceLabels.physicalId, physicalId)).all();
  }

  async upsert(rows: readonly LabelRow[]): Promise<void> {
    this.db.transaction((tx) => {
      for (const r of rows) {
        tx.insert(deviceLabels)
          .values(r)
          .onConflictDoUpdate({ target: [deviceLabels.physicalId, deviceLabels.key], set: { value: r.value } })
          .run();
      }
    });
  }

  async delete(physicalId: string, key: string): Promise<void> {
    this.db
      .delete(deviceLabels)
      .where(and(eq(deviceLabels.physicalId, physicalId), eq(deviceLabels.key, key)))
      .run();
  }
}
