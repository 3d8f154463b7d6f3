import { Errors, farmError } from "@farm/shared/errors";
import type { Candidate } from "../registry/registry.js";
import { describeSelector, type Selector } from "./selector.js";

/** How many values an error names at most. */
const SHOWN = 10;

/** Physical ids as lists print them may end in an ellipsis where they were cut. */
const CUT = /(…|\.\.\.)$/u;

/**
 * Checks a lease selector against every phone the farm knows (online,
 * offline or leased) before the caller waits: a unique prefix of a physical
 * id becomes the full id (as git and docker take short ids); an ambiguous
 * one fails DEVICE_AMBIGUOUS; a selector no phone can ever match fails
 * NO_DEVICE_MATCHES at once, naming the values that exist; one only
 * needs-attention phones match fails DEVICE_NEEDS_ATTENTION. A phone whose
 * identity is not read yet may still turn out to match, and a farm that
 * knows no phone yet has nothing to compare against: both keep the wait.
 */
export function resolveSelector(
  s: Selector,
  phones: Iterable<Candidate>,
  labelsOf: (physicalId: string) => Record<string, string>,
  attentionOf: (physicalId: string) => string | undefined = () => undefined,
): Selector {
  const resolved = s.physicalId ? { ...s, physicalId: resolvePhysicalId(s.physicalId, [...phones]) } : s;
  let any = false;
  // Matching phones marked needs-attention (cleanup failed), by physical id: never leased until an admin clears them.
  const held = new Map<string, string>();
  for (const p of phones) {
    any = true;
    if (!couldMatch(p, resolved, labelsOf)) continue;
    const reason = p.physicalId === "" ? undefined : attentionOf(p.physicalId);
    if (reason === undefined) return resolved;
    held.set(p.physicalId, reason);
  }
  if (held.size > 0) {
    const shown = [...held].sort(([a], [b]) => (a < b ? -1 : 1)).slice(0, SHOWN).map(([id, why]) => `${id} (${why})`);
    throw farmError(
      Errors.DEVICE_NEEDS_ATTENTION,
      `every phone that matches ${describeSelector(s)} needs attention after a failed cleanup: ${shown.join("; ")}${held.size > SHOWN ? `, … (${held.size - SHOWN} more)` : ""}; an admin clears it with farm devices clear-attention`,
      fieldOf(s),
    );
  }
  // Only a refusal lists every phone (sorted, for the nearest values).
  if (!any) return resolved;
  throw farmError(Errors.NO_DEVICE_MATCHES, `no phone in the farm (online, offline or leased) matches ${describeSelector(s)}; ${nearest(s, [...phones], labelsOf)}`, fieldOf(s));
}

function resolvePhysicalId(given: string, phones: readonly Candidate[]): string {
  const ids = [...new Set(phones.map((p) => p.physicalId).filter((id) => id !== ""))].sort();
  if (ids.includes(given)) return given;
  const prefix = given.replace(CUT, "");
  const found = ids.filter((id) => id.startsWith(prefix));
  if (found.length === 1) return found[0] as string;
  if (found.length > 1) {
    throw farmError(Errors.DEVICE_AMBIGUOUS, `physical id prefix ${prefix} matches ${found.length} phones: ${listed(found)}; give more of the id`, "physical-id");
  }
  return given;
}

function couldMatch(p: Candidate, s: Selector, labelsOf: (physicalId: string) => Record<string, string>): boolean {
  if (s.serial && p.serial !== s.serial) return false;
  if (s.agent && p.agentId !== s.agent && p.agentName !== s.agent) return false;
  // Not read yet: its model, api level and id are unknown, so it may match.
  if (p.physicalId === "") return true;
  if (s.physicalId && p.physicalId !== s.physicalId) return false;
  if (s.model && p.model !== s.model) return false;
  if (s.apiLevelMin && p.apiLevel < s.apiLevelMin) return false;
  if (s.apiLevelMax && p.apiLevel > s.apiLevelMax) return false;
  const labels = labelsOf(p.physicalId);
  return Object.entries(s.labels).every(([k, v]) => labels[k] === v);
}

/** The values that exist for each field the selector sets. */
function nearest(s: Selector, phones: readonly Candidate[], labelsOf: (physicalId: string) => Record<string, string>): string {
  const known = phones.filter((p) => p.physicalId !== "");
  const values = (f: (p: Candidate) => string | number) => [...new Set(known.map(f).filter((v) => v !== "" && v !== 0).map(String))].sort();
  const parts: string[] = [];
  if (s.serial) parts.push(`serials: ${listed(phones.map((p) => p.serial).sort())}`);
  if (s.physicalId) parts.push(`physical ids: ${listed(values((p) => p.physicalId))}`);
  if (s.model) parts.push(`models: ${listed(values((p) => p.model))}`);
  if (s.apiLevelMin || s.apiLevelMax) parts.push(`api levels: ${listed(values((p) => p.apiLevel).sort((a, b) => Number(a) - Number(b)))}`);
  if (s.agent) parts.push(`agents: ${listed(values((p) => p.agentName))}`);
  const keys = Object.keys(s.labels);
  if (keys.length > 0) {
    const all = [...new Set(known.map((p) => p.physicalId))].map(labelsOf);
    for (const k of keys) {
      const present = [...new Set(all.map((l) => l[k]).filter((v): v is string => v !== undefined))].sort();
      parts.push(present.length > 0 ? `${k} is one of: ${listed(present)}` : `no phone has label ${k} (labels: ${listed([...new Set(all.flatMap((l) => Object.keys(l)))].sort())})`);
    }
  }
  return parts.length > 0 ? `the farm has ${parts.join("; ")}` : "see farm devices";
}

function listed(values: readonly string[]): string {
  const distinct = [...new Set(values)];
  if (distinct.length === 0) return "none";
  return distinct.length > SHOWN ? `${distinct.slice(0, SHOWN).join(", ")}, … (${distinct.length - SHOWN} more)` : distinct.join(", ");
}

function fieldOf(s: Selector): string {
  if (s.serial) return "device";
  if (s.physicalId) return "physical-id";
  if (s.model) return "model";
  if (s.apiLevelMin || s.apiLevelMax) return "api-level";
  if (s.agent) return "agent";
  return "label";
}
