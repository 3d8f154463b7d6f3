import { h, table } from "../dom.js";
import { bytes, when } from "../format.js";
import { moreButton } from "../more-button.js";
import { batched, type View } from "../view.js";

export const evidenceView: View = (root, state) => {
  const device = h("input", { id: "ev-device", type: "search", placeholder: "serial" });
  const status = h("select", { id: "ev-status" }, ["", "complete", "partial", "failed"].map((s) => h("option", { value: s }, s || "any")));
  const label = h("input", { id: "ev-label", type: "search" });
  const body = h("tbody");
  const more = moreButton(state, "evidence", "bundles");
  root.append(
    h("h1", {}, "Evidence"),
    h(
      "form",
      { class: "filters", role: "search", onsubmit: (e: Event) => e.preventDefault() },
      h("label", { for: "ev-device" }, "Device"),
      device,
      h("label", { for: "ev-status" }, "Status"),
      status,
      h("label", { for: "ev-label" }, "Label"),
      label,
    ),
    table("Bundles in the coordinator's store, newest first (filters apply to the bundles loaded)", ["Bundle", "Kind", "Status", "Device", "Created", "Size", "Label"], body),
    more.el,
  );
  const render = batched(() => {
    more.update();
    const d = device.value.trim();
    const l = label.value.trim().toLowerCase();
    const rows = [...state.evidence.values()]
      .filter((e) => (!d || e.serial.includes(d)) && (!status.value || e.status === status.value) && (!l || (e.label ?? "").toLowerCase().includes(l)))
      .sort((a, b) => Number((b.createTime?.seconds ?? 0n) - (a.createTime?.seconds ?? 0n)) || Number((b.createTime?.nanos ?? 0) - (a.createTime?.nanos ?? 0)));
    body.replaceChildren(
      ...(rows.length === 0
        ? [h("tr", {}, h("td", { colspan: 7 }, "No bundles match."))]
        : rows.map((e) =>
          h(
            "tr",
            { "data-evidence": e.evidenceId },
            h("th", { scope: "row" }, h("a", { href: `#/evidence/${e.evidenceId}` }, e.evidenceId.slice(0, 8))),
            h("td", {}, e.kind),
            h("td", { class: `status status-${e.status}` }, e.status),
            h("td", {}, e.serial),
            h("td", {}, when(e.createTime)),
            h("td", {}, bytes(e.totalBytes)),
            h("td", {}, e.label ?? ""),
          )
        )),
    );
  });
  for (const el of [device, label]) el.addEventListener("input", render);
  status.addEventListener("change", render);
  const off = state.on("evidence", render);
  render();
  return off;
};
