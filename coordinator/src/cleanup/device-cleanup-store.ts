export type CleanupState = "leased" | "cleaning" | "needs-attention";

/** A phone's cleanup as stored (one row per physical device, at most). */
export interface CleanupRow {
  physicalId: string;
  state: CleanupState;
  leaseId: string;
  reason: string;
  /** JSON {packages, paths} read at grant; "" when it could not be read. */
  baseline: string;
  since: number;
}

/** Where phones' cleanup state is kept. Each method is one atomic write or read. */
export interface DeviceCleanupStore {
  all(): Promise<CleanupRow[]>;
  /** Inserts or replaces the phone's row. */
  put(row: CleanupRow): Promise<void>;
  delete(physicalId: string): Promise<void>;
}
