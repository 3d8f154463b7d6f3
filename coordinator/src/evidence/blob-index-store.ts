/** One stored blob: whose it is and what it was checked to be. */
export interface BlobRow {
  id: string;
  owner: string;
  size: number;
  sha256: string;
  name: string;
  createdAt: number;
}

/** Where blobs are listed (the `blobs` table), shared by every replica. */
export interface BlobIndexStore {
  insert(row: BlobRow): Promise<void>;
  get(id: string): Promise<BlobRow | undefined>;
  /** Bytes an owner's stored blobs hold. */
  usage(owner: string): Promise<number>;
  /** Unlists a blob; the row, or undefined when another caller took it first. */
  take(id: string): Promise<BlobRow | undefined>;
  /** Ids of blobs stored before `before` (epoch ms). */
  olderThan(before: number): Promise<string[]>;
  /** Unlists every blob (one coordinator starting afresh). */
  clear(): Promise<void>;
}
