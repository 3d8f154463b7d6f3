import { invalidArgument } from "@farm/shared/errors";
import { validateLabelPair } from "../devices/device-labels.js";

/** What a lease request accepts; an empty field (or 0) accepts anything. */
export interface Selector {
  serial: string;
  physicalId: string;
  labels: Record<string, string>;
  model: string;
  apiLevelMin: number;
  apiLevelMax: number;
  agent: string;
}

export function validateSelector(s: Selector): void {
  for (const [k, v] of Object.entries(s.labels)) validateLabelPair(k, v);
  if (s.apiLevelMin && s.apiLevelMax && s.apiLevelMin > s.apiLevelMax) throw invalidArgument("api-level", "api level range is empty");
}

/** The selector in words, for errors. */
export function describeSelector(s: Selector): string {
  const parts = [
    s.serial && `device ${s.serial}`,
    s.physicalId && `physical id ${s.physicalId}`,
    ...Object.entries(s.labels).map(([k, v]) => `${k}=${v}`),
    s.model && `model ${s.model}`,
    (s.apiLevelMin || s.apiLevelMax) && `api ${s.apiLevelMin || ""}..${s.apiLevelMax || ""}`,
    s.agent && `agent ${s.agent}`,
  ].filter(Boolean);
  return parts.length > 0 ? parts.join(", ") : "any device";
}
