/**
 * An evidence id the coordinator issued: the only agent (and its token)
 * that may upload it, for which device, and the user it counts against.
 */
export interface EvidenceGrant {
  evidenceId: string;
  kind: "still" | "video";
  agentId: string;
  agentToken: string;
  serial: string;
  physicalId: string;
  requestedBy: string;
  issuedAt: number;
}

/** Issued evidence ids. Each method is one atomic write or read. */
export interface EvidenceGrantStore {
  /** Stores a grant; rejects when its id was already issued. */
  insert(grant: EvidenceGrant): Promise<void>;
  get(evidenceId: string): Promise<EvidenceGrant | undefined>;
  /** Total bytes of indexed bundles whose grant was requested by `user`; 0 when none. */
  storedBytes(user: string): Promise<number>;
}
