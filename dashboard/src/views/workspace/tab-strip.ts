import { h } from "../../dom.js";
import type { WorkspaceTab, WorkspaceTabView, WorkspaceTarget } from "./workspace-tab.js";

/**
 * The workspace's tabs beside the screen (ARIA tabs: arrow keys move between
 * them). A tab's content is built when it is first opened and kept, so a
 * stream it runs goes on while another tab is shown; all are closed with
 * the page.
 */
export function tabStrip(tabs: readonly WorkspaceTab[], first: WorkspaceTarget): { el: HTMLElement; update: (target: WorkspaceTarget) => void; close: () => void } {
  const list = h("div", { class: "tab-list", role: "tablist", "aria-label": "Workspace" });
  const panels = h("div", { class: "tab-panels" });
  const el = h("div", { class: "workspace-tabs" }, list, panels);
  const opened = new Map<string, { view: WorkspaceTabView; panel: HTMLElement }>();
  let target = first;
  const buttons = tabs.map((tab) =>
    h("button", {
      type: "button",
      role: "tab",
      id: `tab-${tab.id}`,
      "aria-controls": `panel-${tab.id}`,
      "aria-selected": "false",
      tabindex: "-1",
      "data-tab": tab.id,
      onclick: () => select(tab.id),
      onkeydown: (e: Event) => {
        const k = (e as KeyboardEvent).key;
        const at = tabs.findIndex((t) => t.id === tab.id);
        const next = k === "ArrowRight" ? at + 1 : k === "ArrowLeft" ? at - 1 : -2;
        if (next === -2) return;
        e.preventDefault();
        const t = tabs[(next + tabs.length) % tabs.length];
        if (t) {
          select(t.id);
          buttons.find((b) => b.dataset["tab"] === t.id)?.focus();
        }
      },
    }, tab.title)
  );
  list.append(...buttons);
  const select = (id: string) => {
    const tab = tabs.find((t) => t.id === id);
    if (!tab) return;
    let entry = opened.get(id);
    if (!entry) {
      const view = tab.open(target);
      const panel = h("div", { role: "tabpanel", id: `panel-${id}`, "aria-labelledby": `tab-${id}`, class: "tab-panel", tabindex: "0" }, view.el);
      panels.append(panel);
      entry = { view, panel };
      opened.set(id, entry);
    }
    for (const b of buttons) {
      const on = b.dataset["tab"] === id;
      b.setAttribute("aria-selected", String(on));
      b.tabIndex = on ? 0 : -1;
    }
    for (const [other, e] of opened) e.panel.hidden = other !== id;
  };
  if (tabs[0]) select(tabs[0].id);
  return {
    el,
    update: (next) => {
      target = next;
      for (const e of opened.values()) e.view.update(next);
    },
    close: () => {
      for (const e of opened.values()) e.view.close();
      opened.clear();
    },
  };
}
