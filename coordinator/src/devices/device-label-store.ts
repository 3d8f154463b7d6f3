/** One label on a physical device. */
export interface LabelRow {
  physicalId: string;
  key: string;
  value: string;
}

/** Where device labels are kept. Each method is one atomic write. */
export interface DeviceLabelStore {
  all(): Promise<LabelRow[]>;
  /** One device's labels. */
  of(physicalId: string): Promise<LabelRow[]>;
  /** Inserts the labels, replacing the value of a key the device already has. */
  upsert(rows: readonly LabelRow[]): Promise<void>;
  delete(physicalId: string, key: string): Promise<void>;
}
