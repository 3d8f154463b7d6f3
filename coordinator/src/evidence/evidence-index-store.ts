/** A published bundle as indexed; its files live under <data-dir>/evidence/<id>/. */
export interface EvidenceRow {
  evidenceId: string;
  kind: string;
  status: string;
  /** null when the bundle has no label. */
  label: string | null;
  serial: string;
  physicalId: string;
  agentId: string;
  createdAt: number;
  totalBytes: number;
  manifestSha256: string;
}

/** Filters of a listing; "" and undefined are no filter. */
export interface EvidenceFilter {
  serial?: string;
  status?: string;
  label?: string;
}

/** Stored bundles and their bytes for one (kind, status). */
export interface EvidenceTotal {
  kind: string;
  status: string;
  bundles: number;
  bytes: number;
}

/** The index of published bundles. Each method is one atomic write or read. */
export interface EvidenceIndexStore {
  get(evidenceId: string): Promise<EvidenceRow | undefined>;
  /** Of these ids, those indexed. */
  indexedAmong(evidenceIds: readonly string[]): Promise<Set<string>>;
  /** Indexes a bundle; rejects when its id is already indexed. */
  insert(row: EvidenceRow): Promise<void>;
  totals(): Promise<EvidenceTotal[]>;
  /**
   * Up to `limit` bundles matching the filter, newest first by
   * (created_at, evidence_id), strictly after the key `after` when given.
   * Ids compare bytewise in both dialects.
   */
  listAfter(filter: EvidenceFilter, after: readonly [number, string] | undefined, limit: number): Promise<EvidenceRow[]>;
}
