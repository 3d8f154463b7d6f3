import { eq } from "drizzle-orm";
import type { PgCoordinatorDb } from "../db/open-postgres.js";
import { deviceCleanup } from "../db/pg-schema.js";
import type { CleanupRow, DeviceCleanupStore } from "./device-cleanup-store.js";

/** Phones' cleanup state in the replicas' PostgreSQL database. */
export class PgDeviceCleanupStore implements DeviceCleanupStore {
  constructor(private readonly db: PgCoordinatorDb) {}

  all(): Promise<CleanupRow[]> {
    return this.db.select().from(deviceCleanup);
  }

  async put(row: CleanupRow): Promise<void> {
    const { physicalId: _, ...rest } = row;
    await this.db.insert(deviceCleanup).values(row).onConflictDoUpdate({ target: deviceCleanup.physicalId, set: rest });
  }

  async delete(physicalId: string): Promise<void> {
    await this.db.delete(deviceCleanup).where(eq(deviceCleanup.physicalId, physicalId));
  }
}
