import { fileUrl } from "../api.js";
import { h, replaceChildren } from "../dom.js";
import { ago } from "../format.js";
import type { LiveState } from "../live-state.js";
import { liveThumb } from "./device-thumb.js";
import { leaseTokenOf } from "./workspace/lease-token.js";

/**
 * Live thumbnails at once: a browser opens at most 6 connections to one
 * origin over HTTP/1.1 and each stream holds one (the watch stream another),
 * so plain http gets a few; over https (HTTP/2) one connection carries many.
 */
export const liveThumbLimit = () => (location.protocol === "https:" ? 24 : 4);

interface Running {
  /** What the thumbnail was started for: serial and lease. */
  key: string;
  thumb: { el: HTMLCanvasElement; stop: () => void };
  failed?: string;
}

/**
 * The devices page as a grid: one card per phone with a live thumbnail
 * (for phones the signed-in user may watch: the ones they hold, every one
 * for an admin), otherwise a still: who holds it, or its last captured
 * screenshot when it is free. A card opens the phone's workspace.
 */
export function deviceGrid(state: LiveState): { el: HTMLElement; render: (groups: readonly string[]) => void; update: (group: string) => void; stop: () => void } {
  const list = h("ul", { class: "device-grid", id: "device-grid", "aria-label": "Devices" });
  const note = h("p", { class: "count", "data-cell": "grid-note" });
  const el = h("div", {}, note, list);
  const running = new Map<string, Running>();
  const cards = new Map<string, HTMLLIElement>();
  let shown: readonly string[] = [];

  /** Whether this user may watch the phone's screen now, and with which lease token. */
  const watchable = (physicalId: string): { ok: boolean; token: string } => {
    const lease = physicalId ? state.leases.get(physicalId) : undefined;
    const token = lease ? leaseTokenOf(physicalId) : "";
    if (state.me?.admin) return { ok: physicalId !== "", token };
    return { ok: lease !== undefined && (lease.holder === state.me?.name || token !== ""), token };
  };

  const card = (group: string, liveSlot: boolean): HTMLLIElement | undefined => {
    const aliases = state.aliases(group);
    const first = aliases[0];
    if (!first) return undefined;
    const p = first.properties;
    const physicalId = p?.physicalId ?? "";
    const lease = physicalId ? state.leases.get(physicalId) : undefined;
    const online = aliases.find((d) => d.state === "device");
    const st = online ? "device" : (aliases.find((d) => d.state !== "device")?.state ?? "gone");
    const labels = physicalId ? (state.labels.get(physicalId) ?? {}) : {};
    const w = watchable(physicalId);
    let picture: HTMLElement;
    if (w.ok && online && liveSlot) {
      const key = `${online.serial}\n${lease?.leaseId ?? ""}\n${w.token}`;
      let r = running.get(group);
      if (!r || r.key !== key) {
        r?.thumb.stop();
        const entry: Running = {
          key,
          thumb: liveThumb(online.serial, w.token, (message) => {
            entry.failed = message;
            update(group);
          }),
        };
        r = entry;
        running.set(group, r);
      }
      picture = r.failed ? h("div", { class: "thumb still", "data-cell": "thumb-failed" }, r.failed) : r.thumb.el;
    } else {
      const last = physicalId && !lease
        ? [...state.evidence.values()]
          .filter((e) => e.kind === "still" && e.physicalId === physicalId && e.status !== "failed")
          .sort((a, b) => Number((b.createTime?.seconds ?? 0n) - (a.createTime?.seconds ?? 0n)))[0]
        : undefined;
      picture = last
        ? h("img", { class: "thumb still", src: fileUrl(last.evidenceId, "screenshot.png"), alt: `Last screenshot of ${p?.model ?? group}, ${ago(last.createTime)}`, loading: "lazy" })
        : h("div", { class: "thumb still" }, lease ? `Held by ${lease.holder}` : w.ok && online ? "Live view: open it (thumbnail limit reached)" : "No live view");
    }
    return h(
      "li",
      { class: "device-card", "data-group": group },
      h("a", { href: `#/devices/${encodeURIComponent(group)}`, "aria-label": `Open ${p?.model ?? first.serial} (${first.serial})` }, picture),
      h("div", { class: "card-caption" }, h("strong", {}, p?.model ?? first.serial), " ", h("span", { class: `state state-${st}`, "data-cell": "state" }, st)),
      h("div", { class: "count" }, aliases.map((d) => d.serial).join(", ")),
      h("div", { "data-cell": "holder" }, lease ? `Held by ${lease.holder}` : "Free"),
      Object.keys(labels).length ? h("div", {}, Object.entries(labels).map(([k, v]) => h("span", { class: "label-chip" }, `${k}=${v}`))) : "",
    );
  };

  /** The phones given live slots: watchable, online, in display order, up to the limit. */
  const liveSlots = (): Set<string> => {
    const out = new Set<string>();
    for (const g of shown) {
      if (out.size >= liveThumbLimit()) break;
      const first = state.aliases(g)[0];
      if (first && state.aliases(g).some((d) => d.state === "device") && watchable(first.properties?.physicalId ?? "").ok) out.add(g);
    }
    return out;
  };
  const stopUnused = (keep: Set<string>) => {
    for (const [g, r] of running) {
      if (keep.has(g)) continue;
      r.thumb.stop();
      running.delete(g);
    }
  };
  const render = (groups: readonly string[]) => {
    shown = groups;
    const slots = liveSlots();
    stopUnused(slots);
    cards.clear();
    const items: HTMLLIElement[] = [];
    for (const g of groups) {
      const c = card(g, slots.has(g));
      if (!c) continue;
      cards.set(g, c);
      items.push(c);
    }
    replaceChildren(list, items);
    const watchableCount = [...shown].filter((g) => watchable(state.aliases(g)[0]?.properties?.physicalId ?? "").ok).length;
    note.textContent = watchableCount > slots.size ? `Live thumbnails for ${slots.size} of the ${watchableCount} phones you may watch (a browser's connection limit); open a phone for its live screen.` : "";
  };
  const update = (group: string) => {
    const old = cards.get(group);
    if (!old) return;
    const slots = liveSlots();
    // A phone that gained or lost a live slot moves the others: draw all again.
    if (slots.has(group) !== running.has(group)) return render(shown);
    const next = card(group, slots.has(group));
    if (!next) return render(shown);
    old.replaceWith(next);
    cards.set(group, next);
  };
  return {
    el,
    render,
    update,
    stop: () => {
      stopUnused(new Set());
      cards.clear();
    },
  };
}
