import { eq } from "drizzle-orm";
import type { CoordinatorDb } from "../db/open-database.js";
import { deviceCleanup } from "../db/schema.js";
import type { CleanupRow, DeviceCleanupStore } from "./device-cleanup-store.js";

/** Phones' cleanup state in the coordinator's SQLite database. */
export class SqliteDeviceCleanupStore implements DeviceCleanupStore {
  constructor(private readonly db: CoordinatorDb) {}

  async all(): Promise<CleanupRow[]> {
    return this.db.select().from(deviceCleanup).all();
  }

  async put(row: CleanupRow): Promise<void> {
    const { physicalId: _, ...rest } = row;
    this.db.insert(deviceCleanup).values(row).onConflictDoUpdate({ target: deviceCleanup.physicalId, set: rest }).run();
  }

  async delete(physicalId: string): Promise<void> {
    this.db.delete(deviceCleanup).where(eq(deviceCleanup.physicalId, physicalId)).run();
  }
}
