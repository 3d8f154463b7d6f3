import type { Device } from "@farm/shared/gen/farm/v1/registry_pb";
import { h } from "../dom.js";
import { ago, shortId, when } from "../format.js";
import type { LiveState } from "../live-state.js";
import { moreButton } from "../more-button.js";
import type { View } from "../view.js";
import { deviceGrid } from "./device-grid.js";

/** Where the chosen layout (table or grid) is remembered, per browser. */
const LAYOUT_KEY = "farm.devices.layout";

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
    h(
      "td",
      { class: "aliases" },
      aliases.map((d) =>
        h("span", { class: `alias alias-${d.state}`, title: `on agent ${d.agentName}: ${d.state}${d.quarantineReason ? ` (${d.quarantineReason})` : ""}` }, d.state === "quarantined" ? `${d.serial} on ${d.agentName}: quarantined` : d.serial)
      ),
    ),
    h("td", { class: `state state-${st}`, "data-cell": "state", ...(first.attentionReason ? { title: first.attentionReason } : {}) }, st),
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

/** Where the coordinator lists a device: agent id, then serial (both compare by UTF-16 code units). */
const listKey = (d: Device) => `${d.agentId}\u0000${d.serial}`;

/**
 * One row per physical phone, for the devices read so far: the coordinator
 * sends them a page at a time (by agent id, then serial; "More devices"
 * reads the next), filtered by state on its side. Rows keep the order their
 * first alias was listed in, so a page read later adds rows below, and an
 * alias on a later page joins its phone's row. The search narrows the rows
 * read. A change re-renders only its own row, and otherwise only the counts.
 */
export const devicesView: View = (root, state) => {
  const search = h("input", { id: "device-search", type: "search", placeholder: "serial, model, label, holder" });
  const stateFilter = h(
    "select",
    { id: "device-state" },
    ["", "device", "identity-pending", "offline", "unauthorized", "agent-offline", "quarantined", "cleaning", "needs-attention"].map((s) => h("option", { value: s }, s || "any")),
  );
  stateFilter.value = state.deviceState;
  const count = h("p", { class: "count", "aria-live": "polite" });
  const more = moreButton(state, "devices", "devices");
  const body = h("tbody");
  const grid = deviceGrid(state);
  let layout: "table" | "grid" = localStorage.getItem(LAYOUT_KEY) === "grid" ? "grid" : "table";
  const layoutButton = (which: "table" | "grid", label: string) =>
    h("button", {
      type: "button",
      "data-layout": which,
      onclick: () => {
        layout = which;
        localStorage.setItem(LAYOUT_KEY, which);
        showLayout();
        renderRows();
      },
    }, label);
  const layoutButtons = [layoutButton("table", "Table"), layoutButton("grid", "Grid")];
  /** Matching group keys in display order. */
  let visible: string[] = [];
  const rows = new Map<string, HTMLTableRowElement>();
  root.append(
    h("h1", {}, "Devices"),
    h(
      "form",
      { class: "filters", role: "search", onsubmit: (e: Event) => e.preventDefault() },
      h("label", { for: "device-search" }, "Search"),
      search,
      h("label", { for: "device-state" }, "State"),
      stateFilter,
      h("span", { class: "layout-switch", role: "group", "aria-label": "Layout" }, layoutButtons),
    ),
    h("div", { class: "pager" }, count),
    grid.el,
    h(
      "div",
      { class: "table-wrap", id: "devices-table" },
      h(
        "table",
        { id: "devices" },
        h("caption", {}, "One row per physical device; aliases are its adb serials"),
        h("thead", {}, h("tr", {}, ["Device", "Aliases", "State", "Model", "API", "Labels", "Lease holder", "Since"].map((t) => h("th", { scope: "col" }, t)))),
        body,
      ),
    ),
    more.el,
  );
  const query = () => search.value.trim().toLowerCase();
  const showCount = () => {
    const read = `${state.groups.size} device${state.groups.size === 1 ? "" : "s"} read${state.nextPage.devices ? ", more on the coordinator" : ""}`;
    count.textContent = query() === "" ? read : `${visible.length} matching of ${read}`;
    more.update();
  };
  const showLayout = () => {
    for (const b of layoutButtons) b.setAttribute("aria-pressed", String(b.dataset["layout"] === layout));
    grid.el.hidden = layout !== "grid";
    (root.querySelector("#devices-table") as HTMLElement | null)?.toggleAttribute("hidden", layout !== "table");
  };
  const renderRows = () => {
    const t0 = performance.now();
    if (layout === "grid") {
      grid.render(visible);
      body.replaceChildren();
      rows.clear();
      showCount();
      root.dataset["rendered"] = String(visible.length);
      return;
    }
    grid.render([]);
    rows.clear();
    const frag = document.createDocumentFragment();
    for (const group of visible) {
      const tr = row(state, group);
      if (!tr) continue;
      rows.set(group, tr);
      frag.append(tr);
    }
    body.replaceChildren(frag);
    showCount();
    root.dataset["rendered"] = String(rows.size);
    performance.measure("farm:devices-render", { start: t0 });
  };
  const refilter = () => {
    const q = query();
    // Each phone where its first alias is listed: a page read later only adds rows below.
    const firstOf = new Map<string, string>();
    for (const g of state.groups.keys()) {
      if (!matches(state, g, q, stateFilter.value)) continue;
      const keys = state.aliases(g).map(listKey);
      // A phone whose last alias moved to another group has no row.
      if (keys.length > 0) firstOf.set(g, keys.reduce((a, b) => (b < a ? b : a)));
    }
    visible = [...firstOf.keys()].sort((a, b) => ((firstOf.get(a) as string) < (firstOf.get(b) as string) ? -1 : 1));
    renderRows();
  };
  const update = (group: string) => {
    const t0 = performance.now();
    const exists = state.groups.has(group);
    const wanted = exists && matches(state, group, query(), stateFilter.value);
    const shown = visible.includes(group);
    if (wanted && shown && layout === "grid") {
      grid.update(group);
    } else if (wanted && shown) {
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
  search.addEventListener("input", refilter);
  stateFilter.addEventListener("change", () => {
    // Rows not in the state go at once; the coordinator's list in that state follows.
    refilter();
    state.setDeviceState(stateFilter.value).catch((err: unknown) => (count.textContent = `Could not read the devices: ${err instanceof Error ? err.message : String(err)}`));
  });
  const offs = [
    state.on("devices", (group) => (group === undefined ? refilter() : update(group))),
    state.on("leases", byPhysical),
    state.on("labels", byPhysical),
    // A new still is a free phone's picture in the grid.
    state.on("evidence", () => {
      if (layout === "grid") renderRows();
    }),
  ];
  showLayout();
  if (state.loaded) refilter();
  return () => {
    offs.forEach((off) => off());
    grid.stop();
    // The filter is this page's: other pages count every device.
    if (state.deviceState) state.setDeviceState("").catch(() => undefined);
  };
};
