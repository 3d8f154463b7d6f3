import { randomUUID } from "node:crypto";
import { Errors, farmError } from "@farm/shared/errors";
import type { EvidenceGrant, EvidenceGrantStore } from "./evidence-grant-store.js";

export type { EvidenceGrant } from "./evidence-grant-store.js";

/** What an agent says about the bundle it starts uploading. */
export interface UploadClaim {
  evidenceId: string;
  agentId: string;
  serial: string;
  physicalId: string;
  kind: string;
}

/**
 * Evidence ids (still captures and video sessions) the coordinator issues
 * with the command it routes to an agent. An id names the agent and the
 * token it attached with, the device, and the user it counts against; an
 * upload is accepted only when all of them match, so no agent can fill or
 * pre-empt another's bundle. Grants are stored, so a bundle staged before a
 * restart (of either side) still goes up.
 */
export class EvidenceGrants {
  constructor(private readonly store: EvidenceGrantStore) {}

  /**
   * Stored before it is returned: an id is never sent to an agent unless its
   * grant is durable. `evidenceId`: the id of the quota reservation made for it.
   */
  async issue(grant: Omit<EvidenceGrant, "evidenceId" | "issuedAt">, evidenceId: string = randomUUID()): Promise<EvidenceGrant> {
    const row: EvidenceGrant = { ...grant, evidenceId, issuedAt: Date.now() };
    await this.store.insert(row);
    return row;
  }

  get(evidenceId: string): Promise<EvidenceGrant | undefined> {
    return this.store.get(evidenceId);
  }

  /**
   * The grant an upload is for, or EVIDENCE_NOT_ISSUED (PERMISSION_DENIED)
   * naming what does not match. Checked before anything is received.
   */
  async authorize(claim: UploadClaim, tokenName: string): Promise<EvidenceGrant> {
    const g = await this.get(claim.evidenceId);
    const refuse = (why: string, field: string) => farmError(Errors.EVIDENCE_NOT_ISSUED, `evidence ${claim.evidenceId}: ${why}; the upload is refused`, field);
    if (!g) throw refuse("this coordinator never issued that evidence id", "evidence_id");
    if (g.agentToken !== tokenName || g.agentId !== claim.agentId) throw refuse("it was issued to another agent", "agent_id");
    if (g.serial !== claim.serial || (g.physicalId !== "" && g.physicalId !== claim.physicalId)) {
      throw refuse(`it was issued for device ${g.serial}${g.physicalId ? ` (${g.physicalId})` : ""}, not ${claim.serial}${claim.physicalId ? ` (${claim.physicalId})` : ""}`, "serial");
    }
    if (g.kind !== claim.kind) throw refuse(`it was issued for a ${g.kind} bundle, not ${claim.kind || "an unnamed kind"}`, "kind");
    return g;
  }

  /** Bytes of stored bundles issued for this user's captures and recordings. */
  storedBytes(user: string): Promise<number> {
    return this.store.storedBytes(user);
  }
}
