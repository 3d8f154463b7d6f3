import { h } from "../dom.js";
import { ago, shortId, when } from "../format.js";
import type { LiveState } from "../live-state.js";
import type { View } from "../view.js";

/** The group's best state: usable if any alias is; quarantined if one waits for an admin. */
function stateOf(state: LiveState, group: string): string {
  const aliases = state.aliases(group);
  if (aliases.some((d) => d.state === "device")) return "device";
  if (aliases.some((d) => d.state === "quarantined")) return "quarantined";
  return aliases[0]?.state ?? "gone";
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
    // A quarantined alias (a second agent's unaccepted claim) is marked where it is listed.
    h("td", { class: "aliases" }, aliases.map((d) => h("span", { class: `alias alias-${d.state}`, title: `on agent ${d.agentName}: ${d.state}${d.quarantineReason ? ` (${d.quarantineReason})` : ""}` }, d.state === "quarantined" ? `${d.serial} on ${d.agentName}: quarantined` : d.serial))),
    h("td", { class: `state state-${st}`, "data-cell": "state" }, st),
    h("td", {}, p?.model ?? ""),
    h("td", {}, p?.apiLevel ? String(p.apiLevel) : ""),
    h("td", {}, Object.entries(labels).map(([k, v]) => h("span", { class: "label-chip" }, `${k}=${v}`))),
    h("td", { "data-cell": "holder" }, lease?.holder ?? ""),
    h("td", { title: when(lease?.acquireTime) }, lease ? ago(lease.acquireTime) : ""),
  );
}

/** Does the group match the search text and state filter? Read from data, not from the DOM. */
function matches(state: LiveState, group: string, query: string, wantState: string): boolean {
  if (wantState && stateOf(state, group) !== wantState && !state.aliases(group).some((d) => d.state === wantState)) return false;
  if (query === "") return true;
  const aliases = state.aliases(group);
  const p = aliases[0]?.properties;
  const physicalId = p?.physicalId ?? "";
  const labels = physicalId ? (state.labels.get(physicalId) ?? {}) : {};
  const hay = [group, p?.model ?? "", p?.manufacturer ?? "", state.leases.get(physicalId)?.holder ?? "", ...aliases.map((d) => d.serial), ...Object.entries(labels).map(([k, v]) => `${k}=${v}`)]
    .join(" ")
    .toLowerCase();
  return hay.includes(query);
}

/** Rows per page: a lab of thousands of phones stays quick to render and to update. */
export const PAGE_SIZE = 200;

/**
 * One row per physical phone, a page at a time. The list is read once; a
 * change re-renders only its own row when it is on the page, and otherwise
 * only the counts.
 */
export const devicesView: View = (root, state) => {
  const search = h("input", { id: "device-search", type: "search", placeholder: "serial, model, label, holder" });
  const stateFilter = h(
    "select",
    { id: "device-state" },
    ["", "device", "offline", "unauthorized", "agent-offline", "quarantined"].map((s) => h("option", { value: s }, s || "any")),
  );
  const count = h("p", { class: "count", "aria-live": "polite" });
  const prev = h("button", { type: "button" }, "Previous page");
  const next = h("button", { type: "button" }, "Next page");
  const body = h("tbody");
  /** Matching group keys in display order. */
  let visible: string[] = [];
  let page = 0;
  const rows = new Map<string, HTMLTableRowElement>();
  root.append(
    h("h1", {}, "Devices"),
    h("form", { class: "filters", role: "search", onsubmit: (e: Event) => e.preventDefault() }, h("label", { for: "device-search" }, "Search"), search, h("label", { for: "device-state" }, "State"), stateFilter),
    h("div", { class: "pager" }, count, prev, next),
    h("div", { class: "table-wrap" }, h("table", { id: "devices" }, h("caption", {}, "One row per physical device; aliases are its adb serials"), h("thead", {}, h("tr", {}, ["Device", "Aliases", "State", "Model", "API", "Labels", "Lease holder", "Since"].map((t) => h("th", { scope: "col" }, t)))), body)),
  );
  const query = () => search.value.trim().toLowerCase();
  const showCount = () => {
    const first = visible.length === 0 ? 0 : page * PAGE_SIZE + 1;
    const last = Math.min(visible.length, (page + 1) * PAGE_SIZE);
    count.textContent = `${first}–${last} of ${visible.length} matching (${state.groups.size} devices)`;
    prev.disabled = page === 0;
    next.disabled = last >= visible.length;
  };
  const renderPage = () => {
    const t0 = performance.now();
    rows.clear();
    const frag = document.createDocumentFragment();
    for (const group of visible.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE)) {
      const tr = row(state, group);
      if (!tr) continue;
      rows.set(group, tr);
      frag.append(tr);
    }
    body.replaceChildren(frag);
    showCount();
    root.dataset["rendered"] = String(state.groups.size);
    performance.measure("farm:devices-render", { start: t0 });
  };
  const refilter = () => {
    const q = query();
    visible = [...state.groups.keys()].filter((g) => matches(state, g, q, stateFilter.value)).sort();
    page = Math.min(page, Math.max(0, Math.ceil(visible.length / PAGE_SIZE) - 1));
    renderPage();
  };
  const update = (group: string) => {
    const t0 = performance.now();
    const exists = state.groups.has(group);
    const wanted = exists && matches(state, group, query(), stateFilter.value);
    const shown = visible.includes(group);
    if (wanted && shown) {
      // The common case: a row that changes in place, if it is on this page.
      const old = rows.get(group);
      const next = old ? row(state, group) : undefined;
      if (old && next) {
        old.replaceWith(next);
        rows.set(group, next);
      }
    } else if (wanted !== shown) {
      refilter();
    }
    performance.measure("farm:row-update", { start: t0 });
  };
  const byPhysical = (physicalId?: string) => {
    if (!physicalId) return refilter();
    if (state.groups.has(physicalId)) update(physicalId);
  };
  search.addEventListener("input", () => {
    page = 0;
    refilter();
  });
  stateFilter.addEventListener("change", () => {
    page = 0;
    refilter();
  });
  prev.addEventListener("click", () => {
    page = Math.max(0, page - 1);
    renderPage();
  });
  next.addEventListener("click", () => {
    page += 1;
    renderPage();
  });
  const offs = [
    state.on("devices", (group) => (group === undefined ? refilter() : update(group))),
    state.on("leases", byPhysical),
    state.on("labels", byPhysical),
  ];
  if (state.loaded) refilter();
  return () => offs.forEach((off) => off());
};
