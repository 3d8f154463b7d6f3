import { describe, expect, it } from "vitest";
import { toErrorReport } from "@farm/shared/errors";
import type { Candidate } from "../registry/registry.js";
import type { Selector } from "./selector.js";
import { resolveSelector } from "./selector-match.js";

const any: Selector = { serial: "", physicalId: "", labels: {}, model: "", apiLevelMin: 0, apiLevelMax: 0, agent: "" };
const phone = (physicalId: string, model: string, apiLevel = 34, agentName = "lab-1"): Candidate => ({ physicalId, agentId: `id-${agentName}`, agentName, serial: `s-${physicalId}`, model, apiLevel });
const phones = [phone("pd-aaaa1111", "Pixel 7"), phone("pd-aaaa2222", "Pixel 8", 35), phone("pd-bbbb3333", "Galaxy S23", 33, "lab-2")];
const labels: Record<string, Record<string, string>> = { "pd-aaaa1111": { pool: "dev", rack: "a1" } };
const labelsOf = (id: string) => labels[id] ?? {};

function refusal(s: Partial<Selector>, known = phones): { code: string; field: string; message: string } {
  try {
    resolveSelector({ ...any, ...s }, known, labelsOf);
  } catch (err) {
    const r = toErrorReport(err);
    return { code: r.code, field: "field" in r ? String(r.field) : "", message: `${r.code}: ${r.message}` };
  }
  throw new Error("not refused");
}

describe("resolveSelector", () => {
  it("lets a selector some phone matches through, leased or offline alike (it waits)", () => {
    expect(resolveSelector({ ...any, model: "Pixel 8" }, phones, labelsOf).model).toBe("Pixel 8");
    expect(resolveSelector({ ...any, labels: { pool: "dev" } }, phones, labelsOf).labels).toEqual({ pool: "dev" });
  });

  it("refuses a model no phone has, naming the models there are", () => {
    const r = refusal({ model: "NoSuchPhone" });
    expect(r.message).toContain("NO_DEVICE_MATCHES");
    expect(r.message).toContain("model NoSuchPhone");
    expect(r.message).toContain("models: Galaxy S23, Pixel 7, Pixel 8");
  });

  it("refuses a label no phone carries, naming the values and keys there are", () => {
    expect(refusal({ labels: { pool: "ci" } }).message).toContain("pool is one of: dev");
    expect(refusal({ labels: { owner: "qa" } }).message).toContain("no phone has label owner (labels: pool, rack)");
  });

  it("refuses an api range and an agent no phone fits", () => {
    expect(refusal({ apiLevelMin: 36 }).message).toContain("api levels: 33, 34, 35");
    expect(refusal({ agent: "lab-9" }).message).toContain("agents: lab-1, lab-2");
  });

  it("takes a unique prefix of a physical id, with or without the list's ellipsis", () => {
    expect(resolveSelector({ ...any, physicalId: "pd-bbbb" }, phones, labelsOf).physicalId).toBe("pd-bbbb3333");
    expect(resolveSelector({ ...any, physicalId: "pd-aaaa1…" }, phones, labelsOf).physicalId).toBe("pd-aaaa1111");
  });

  it("refuses an ambiguous prefix with DEVICE_AMBIGUOUS, listing the candidates", () => {
    const r = refusal({ physicalId: "pd-aaaa" });
    expect(r.message).toContain("DEVICE_AMBIGUOUS");
    expect(r.message).toContain("pd-aaaa1111, pd-aaaa2222");
  });

  it("keeps waiting while a phone's identity is unread or the farm knows no phone", () => {
    expect(resolveSelector({ ...any, model: "NoSuchPhone" }, [...phones, phone("", "")], labelsOf).model).toBe("NoSuchPhone");
    expect(resolveSelector({ ...any, model: "NoSuchPhone" }, [], labelsOf).model).toBe("NoSuchPhone");
  });

  it("refuses a selector only needs-attention phones match, with their reasons; lets one through that another phone matches", () => {
    const attention = (id: string) => (id === "pd-aaaa1111" ? "uninstall com.x failed" : undefined);
    let r: ReturnType<typeof toErrorReport> | undefined;
    try {
      resolveSelector({ ...any, model: "Pixel 7" }, phones, labelsOf, attention);
    } catch (err) {
      r = toErrorReport(err);
    }
    expect(r).toMatchObject({ code: "DEVICE_NEEDS_ATTENTION", field: "model", message: expect.stringMatching(/pd-aaaa1111 \(uninstall com\.x failed\).*clear-attention/) });
    expect(resolveSelector({ ...any, agent: "lab-1" }, phones, labelsOf, attention).agent).toBe("lab-1");
    // A selector no phone matches at all is still told what exists.
    expect(() => resolveSelector({ ...any, model: "NoSuchPhone" }, phones, labelsOf, attention)).toThrow(/models/);
  });
});
