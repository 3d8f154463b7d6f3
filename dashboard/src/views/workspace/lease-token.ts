// The lease token a browser tab holds for a phone: kept in the tab's
// sessionStorage (it never leaves the tab, and a reload keeps it).

const key = (physicalId: string) => `farm.lease.${physicalId}`;

export function leaseTokenOf(physicalId: string): string {
  return sessionStorage.getItem(key(physicalId)) ?? "";
}

export function keepLeaseToken(physicalId: string, token: string): void {
  sessionStorage.setItem(key(physicalId), token);
}

export function forgetLeaseToken(physicalId: string): void {
  sessionStorage.removeItem(key(physicalId));
}
