import { Errors, farmError } from "@farm/shared/errors";
import type { EvidenceGrants } from "./evidence-grants.js";

/** Managed evidence one user may keep in the coordinator's store, by default. */
export const DEFAULT_EVIDENCE_QUOTA_BYTES = 10 * 1024 ** 3;

/**
 * Refuses a capture or recording before it runs when the caller's stored
 * evidence has reached the quota (QUOTA_EXCEEDED): one user cannot fill the
 * store for everyone. A bundle in flight may take a user past it once.
 */
export async function requireEvidenceQuota(grants: EvidenceGrants, user: string, quotaBytes: number): Promise<void> {
  const used = await grants.storedBytes(user);
  if (used < quotaBytes) return;
  throw farmError(
    Errors.QUOTA_EXCEEDED,
    `${user} already stores ${used} bytes of managed evidence; the quota per user is ${quotaBytes} bytes (coordinator --evidence-quota). Nothing was captured`,
    "quota",
  );
}
