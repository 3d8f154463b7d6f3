import { h } from "../dom.js";
import { ago, shortId, when } from "../format.js";
import type { LiveState } from "../live-state.js";
import type { View } from "../view.js";

/** The group's best state: usable if any alias is. */
function stateOf(state: LiveState, group: string): string {
  const aliases = state.aliases(group);
  return aliases.some((d) => d.state === "device") ? "device" : (aliases[0]?.state ?? "gone");
}

function row(state: LiveState, group: string): HTMLTableRowElement | undefined {
  const aliases = state.aliases(group);
  const first = aliases[0];
  if (!first) return undefined;
  const p = first.properties;
  const physicalId = p?.physicalId ?? "";
  const lease = physicalId ? state.leases.get(physicalId) : undefined;
  const labels = physicalId ? (state.labels.get(physicalId) ?? {}) : {};
  const st = stateOf(state, group);
  return h(
    "tr",
    { "data-group": group },
    h("th", { scope: "row" }, h("a", { href: `#/devices/${encodeURIComponent(group)}`, title: physicalId || group }, physicalId ? shortId(physicalId) : first.serial)),
    h("td", { class: "aliases" }, aliases.map((d) => h("span", { class: "alias", title: `on agent ${d.agentName}: ${d.state}` }, d.serial))),
    h("td", { class: `state state-${st}`, "data-cell": "state" }, st),
    h("td", {}, p?.model ?? ""),
    h("td", {}, p?.apiLevel ? String(p.apiLevel) : ""),
    h("td", {}, Object.entries(labels).map(([k, v]) => h("span", { class: "label-chip" }, `${k}=${v}`))),
    h("td", { "data-cell": "holder" }, lease?.holder ?? ""),
    h("td", { title: when(lease?.acquireTime) }, lease ? ago(lease.acquireTime) : ""),
  );
}

function matches(tr: HTMLTableRowElement, query: string, wantState: string): boolean {
  if (wantState && tr.querySelector('[data-cell="state"]')?.textContent !== wantState) return false;
  return query === "" || (tr.textContent ?? "").toLowerCase().includes(query);
}

/**
 * One row per physical phone. A change re-renders only its own row, found
 * by its group key; the list itself is read once.
 */
export const devicesView: View = (root, state) => {
  const search = h("input", { id: "device-search", type: "search", placeholder: "serial, model, label, holder" });
  const stateFilter = h(
    "select",
    { id: "device-state" },
    ["", "device", "offline", "unauthorized", "agent-offline"].map((s) => h("option", { value: s }, s || "any")),
  );
  const count = h("p", { class: "count", "aria-live": "polite" });
  const body = h("tbody");
  const rows = new Map<string, HTMLTableRowElement>();
  root.append(
    h("h1", {}, "Devices"),
    h("form", { class: "filters", role: "search", onsubmit: (e: Event) => e.preventDefault() }, h("label", { for: "device-search" }, "Search"), search, h("label", { for: "device-state" }, "State"), stateFilter),
    count,
    h("div", { class: "table-wrap" }, h("table", { id: "devices" }, h("caption", {}, "One row per physical device; aliases are its adb serials"), h("thead", {}, h("tr", {}, ["Device", "Aliases", "State", "Model", "API", "Labels", "Lease holder", "Since"].map((t) => h("th", { scope: "col" }, t)))), body)),
  );
  const filter = () => {
    const q = search.value.trim().toLowerCase();
    let shown = 0;
    for (const tr of rows.values()) {
      const show = matches(tr, q, stateFilter.value);
      tr.hidden = !show;
      if (show) shown++;
    }
    count.textContent = `${shown} of ${rows.size} devices`;
  };
  const renderAll = () => {
    rows.clear();
    const frag = document.createDocumentFragment();
    for (const group of [...state.groups.keys()].sort()) {
      const tr = row(state, group);
      if (!tr) continue;
      rows.set(group, tr);
      frag.append(tr);
    }
    body.replaceChildren(frag);
    filter();
    root.dataset["rendered"] = String(rows.size);
  };
  const update = (group: string) => {
    const next = row(state, group);
    const old = rows.get(group);
    if (next) {
      next.hidden = !matches(next, search.value.trim().toLowerCase(), stateFilter.value);
      if (old) old.replaceWith(next);
      else body.append(next);
      rows.set(group, next);
    } else if (old) {
      old.remove();
      rows.delete(group);
    }
    count.textContent = `${[...rows.values()].filter((r) => !r.hidden).length} of ${rows.size} devices`;
  };
  const byPhysical = (physicalId?: string) => {
    if (!physicalId) return renderAll();
    if (state.groups.has(physicalId)) update(physicalId);
  };
  search.addEventListener("input", filter);
  stateFilter.addEventListener("change", filter);
  const offs = [
    state.on("devices", (group) => (group === undefined ? renderAll() : update(group))),
    state.on("leases", byPhysical),
    state.on("labels", byPhysical),
  ];
  if (state.loaded) renderAll();
  return () => offs.forEach((off) => off());
};
