import type { ClaimRow, ClaimStatus } from "./registry-store.js";

export type { ClaimStatus } from "./registry-store.js";

/** What keeps an agent from using a serial: its claim on one key, and who else claims that key. */
export interface ClaimBlocker {
  key: string;
  status: "pending" | "rejected";
  /** Agents whose claim on the key counts (owner or accepted). */
  others: string[];
  decidedBy: string;
}

/** The keys a device report claims: its adb serial and, once read, its physical id. */
export function claimKeys(serial: string, physicalId: string): string[] {
  return physicalId ? [`serial:${serial}`, `physical:${physicalId}`] : [`serial:${serial}`];
}

/**
 * Who may report which phone. The first agent to report a physical id or an
 * adb serial owns it; another agent reporting the same key later gets a
 * pending claim, and its serial stays quarantined until an admin accepts
 * (one phone on two hosts) or rejects it. Claims outlive the devices that
 * made them, so a phone that drops off adb for a reboot cannot be taken
 * over in the meantime; removing an agent forgets its claims.
 *
 * In memory only: changes are returned as rows, which the registry writes
 * together with the change that made them (and takes back from here when
 * that write fails).
 */
export class DeviceClaims {
  /**
   * Each key's claims, one row per agent. An array, not a Map per key: a key
   * almost always has one claim, and a one-entry Map cost about 200 bytes
   * more a key (20,000 keys for 10,000 phones; test/bench/coordinator-load.ts).
   */
  private readonly byKey = new Map<string, ClaimRow[]>();

  constructor(
    rows: readonly ClaimRow[],
    private readonly now: () => number,
  ) {
    for (const row of rows) this.set({ ...row });
  }

  /**
   * Records the claims a report makes. Returns the new claims (to store)
   * and the keys this agent now claims for the first time while another
   * agent holds them.
   */
  claim(agentId: string, keys: string[]): { added: ClaimRow[]; contested: string[] } {
    const added: ClaimRow[] = [];
    const contested: string[] = [];
    for (const key of keys) {
      const claims = this.byKey.get(key);
      if (claims && rowOf(claims, agentId)) continue;
      const status: ClaimStatus = claims && claims.length > 0 ? "pending" : "owner";
      const row: ClaimRow = { key, agentId, status, createdAt: this.now(), decidedBy: null, decidedAt: null };
      this.set(row);
      added.push({ ...row });
      if (status === "pending") contested.push(key);
    }
    return { added, contested };
  }

  /** The first key this agent may not use, or undefined when every claim counts. */
  blocker(agentId: string, keys: string[]): ClaimBlocker | undefined {
    for (const key of keys) {
      const claims = this.byKey.get(key);
      const mine = claims && rowOf(claims, agentId);
      if (!claims || !mine || (mine.status !== "pending" && mine.status !== "rejected")) continue;
      const others = claims.filter((c) => c.agentId !== agentId && (c.status === "owner" || c.status === "accepted")).map((c) => c.agentId);
      return { key, status: mine.status, others, decidedBy: mine.decidedBy ?? "" };
    }
    return undefined;
  }

  /**
   * An admin's decision on this agent's contested claims among `keys`.
   * Returns the claims it changed (to store); claims it owns are left alone.
   */
  decide(agentId: string, keys: string[], decision: "accepted" | "rejected", by: string): ClaimRow[] {
    const changed: ClaimRow[] = [];
    for (const key of keys) {
      const mine = this.claimOf(key, agentId);
      if (!mine || mine.status === "owner" || mine.status === decision) continue;
      mine.status = decision;
      mine.decidedBy = by;
      mine.decidedAt = this.now();
      changed.push({ ...mine });
    }
    return changed;
  }

  /** Does this agent have a claim on the key it could be given a decision on? */
  decidable(agentId: string, keys: string[]): boolean {
    return keys.some((k) => {
      const s = this.claimOf(k, agentId)?.status;
      return s !== undefined && s !== "owner";
    });
  }

  /** Copies of this agent's claims among `keys`: what `restore` puts back if a decision is not stored. */
  saved(agentId: string, keys: string[]): ClaimRow[] {
    return keys.flatMap((k) => {
      const c = this.claimOf(k, agentId);
      return c ? [{ ...c }] : [];
    });
  }

  /** Puts claims back as they were (a decision that could not be stored). */
  restore(rows: readonly ClaimRow[]): void {
    for (const row of rows) this.set({ ...row });
  }

  /** Takes back claims `claim` added (the report that made them could not be stored). */
  unclaim(rows: readonly ClaimRow[]): void {
    for (const row of rows) this.drop(row.key, row.agentId);
  }

  /** Drops every claim of a removed agent. */
  forgetAgent(agentId: string): void {
    for (const key of [...this.byKey.keys()]) this.drop(key, agentId);
  }

  private claimOf(key: string, agentId: string): ClaimRow | undefined {
    const claims = this.byKey.get(key);
    return claims && rowOf(claims, agentId);
  }

  /** Adds or replaces this row's agent's claim on its key (in place: the key's order of claims stays). */
  private set(row: ClaimRow): void {
    const claims = this.byKey.get(row.key);
    if (!claims) {
      this.byKey.set(row.key, [row]);
      return;
    }
    const i = claims.findIndex((c) => c.agentId === row.agentId);
    if (i === -1) claims.push(row);
    else claims[i] = row;
  }

  private drop(key: string, agentId: string): void {
    const claims = this.byKey.get(key);
    if (!claims) return;
    const i = claims.findIndex((c) => c.agentId === agentId);
    if (i !== -1) claims.splice(i, 1);
    if (claims.length === 0) this.byKey.delete(key);
  }
}

function rowOf(claims: readonly ClaimRow[], agentId: string): ClaimRow | undefined {
  for (const c of claims) if (c.agentId === agentId) return c;
  return undefined;
}
