import { and, eq } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { deviceLabels } from "../db/schema.js";
import type { DeviceLabelStore, LabelRow } from "./device-label-store.js";

/** Device labels in the coordinator's SQLite database. */
export class SqliteDeviceLabelStore implements DeviceLabelStore {
  constructor(private readonly db: CoordinatorDb) {}

  all(): LabelRow[] {
    return this.db.select().from(deviceLabels).all();
  }

  upsert(rows: readonly LabelRow[]): void {
    this.db.transaction((tx) => {
      for (const r of rows) {
        tx.insert(deviceLabels)
          .values(r)
          .onConflictDoUpdate({ target: [deviceLabels.physicalId, deviceLabels.key], set: { value: r.value } })
          .run();
      }
    });
  }

  delete(physicalId: string, key: string): void {
    this.db
      .delete(deviceLabels)
      .where(and(eq(deviceLabels.physicalId, physicalId), eq(deviceLabels.key, key)))
      .run();
  }
}
