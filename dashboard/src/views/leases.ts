import { h, replaceChildren, table } from "../dom.js";
import { ago, when } from "../format.js";
import { batched, type View } from "../view.js";

export const leasesView: View = (root, state) => {
  const active = h("tbody");
  const queue = h("tbody");
  root.append(h("h1", {}, "Leases"), table("Active leases", ["Holder", "Device", "Route", "Since", "Expires"], active), table("Waiting for a device (in order)", ["#", "Holder", "Wants", "Waiting since", "Gives up"], queue));
  const render = batched(() => {
    const leases = [...state.leases.values()].sort((a, b) => Number((a.acquireTime?.seconds ?? 0n) - (b.acquireTime?.seconds ?? 0n)));
    replaceChildren(
      active,
      leases.length === 0
        ? h("tr", {}, h("td", { colspan: 5 }, "No active leases."))
        : leases.map((l) =>
          h(
            "tr",
            { "data-lease": l.leaseId },
            h("th", { scope: "row" }, l.holder),
            h("td", {}, h("a", { href: `#/devices/${encodeURIComponent(l.physicalId)}` }, l.physicalId.slice(0, 12))),
            h("td", {}, `${l.serial} on ${l.agentName}`),
            h("td", { title: when(l.acquireTime) }, ago(l.acquireTime)),
            h("td", {}, when(l.expireTime)),
          )
        ),
    );
    replaceChildren(
      queue,
      state.queue.length === 0
        ? h("tr", {}, h("td", { colspan: 5 }, "Nobody is waiting."))
        : state.queue.map((w, i) => {
          const s = w.selector;
          const wants = [
            s?.serial && `serial ${s.serial}`,
            s?.model && `model ${s.model}`,
            s?.apiLevelMin && `API >= ${s.apiLevelMin}`,
            s?.apiLevelMax && `API <= ${s.apiLevelMax}`,
            s?.agent && `agent ${s.agent}`,
            ...Object.entries(s?.labels ?? {}).map(([k, v]) => `${k}=${v}`),
          ].filter(Boolean).join(", ") || "any device";
          return h("tr", {}, h("td", {}, String(i + 1)), h("th", { scope: "row" }, w.holder), h("td", {}, wants), h("td", { title: when(w.enqueueTime) }, ago(w.enqueueTime)), h("td", {}, when(w.waitDeadline)));
        }),
    );
  });
  const offs = [state.on("leases", render), state.on("queue", render)];
  const tick = setInterval(render, 5_000);
  render();
  return () => {
    offs.forEach((off) => off());
    clearInterval(tick);
  };
};
