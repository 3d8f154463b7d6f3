import type { StoreDb } from "../db/store-db.js";
import type { DeviceLabelStore, LabelRow } from "./device-label-store.js";

/** Device labels, one implementation for SQLite and PostgreSQL (the SQL is the same on both). */
export class KyselyDeviceLabelStore implements DeviceLabelStore {
  constructor(private readonly db: StoreDb) {}

  all(): Promise<LabelRow[]> {
    return this.db.selectFrom("deviceLabels").selectAll().execute();
  }

  of(physicalId: string): Promise<LabelRow[]> {
    return this.db.selectFrom("deviceLabels").selectAll().where("physicalId", "=", physicalId).execute();
  }

  async upsert(rows: readonly LabelRow[]): Promise<void> {
    if (rows.length === 0) return;
    // One statement: all of them or none.
    await this.db
      .insertInto("deviceLabels")
      .values([...rows])
      .onConflict((oc) => oc.columns(["physicalId", "key"]).doUpdateSet((eb) => ({ value: eb.ref("excluded.value") })))
      .execute();
  }

  async delete(physicalId: string, key: string): Promise<void> {
    await this.db.deleteFrom("deviceLabels").where("physicalId", "=", physicalId).where("key", "=", key).execute();
  }
}
