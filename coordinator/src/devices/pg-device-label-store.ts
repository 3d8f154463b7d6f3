import { and, eq, sql } from "drizzle-orm";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { deviceLabels } from "../db/pg-schema.js";
import type { DeviceLabelStore, LabelRow } from "./device-label-store.js";

/** Device labels in the replicas' PostgreSQL database. */
export class PgDeviceLabelStore implements DeviceLabelStore {
  constructor(private readonly db: PgCoordinatorDb) {}

  all(): Promise<LabelRow[]> {
    return this.db.select().from(deviceLabels);
  }

  of(physicalId: string): Promise<LabelRow[]> {
    return this.db.select().from(deviceLabels).where(eq(deviceLabels.physicalId, physicalId));
  }

  async upsert(rows: readonly LabelRow[]): Promise<void> {
    if (rows.length === 0) return;
    // One statement: all of them or none.
    await this.db
      .insert(deviceLabels)
      .values([...rows])
      .onConflictDoUpdate({ target: [deviceLabels.physicalId, deviceLabels.key], set: { value: sql`excluded.value` } });
  }

  async delete(physicalId: string, key: string): Promise<void> {
    await this.db.delete(deviceLabels).where(and(eq(deviceLabels.physicalId, physicalId), eq(deviceLabels.key, key)));
  }
}
