import { api, fileUrl } from "../api.js";
import { h, replaceChildren, table } from "../dom.js";
import { ago, when } from "../format.js";
import { batched, type View } from "../view.js";

/** One physical device: its aliases, properties, lease, labels, recent activity and last screenshot. */
export const devicePageView: View = (root, state, group) => {
  const head = h("div");
  const props = h("tbody");
  const aliases = h("tbody");
  const activity = h("tbody");
  const shot = h("figure", { class: "last-shot" });
  root.append(
    head,
    h("div", { class: "columns" }, h("div", {}, table("Aliases (adb serials)", ["Serial", "Agent", "State", "Updated"], aliases), table("Properties", ["Property", "Value"], props)), shot),
    table("Recent activity on this device", ["Time", "Caller", "Command", "Outcome", "Duration", "Detail"], activity),
  );
  let activityRows: { t: string; caller: string; command: string; outcome: string; ms: number; detail: string }[] = [];
  // Its aliases are read on their own: the device list may not have read this phone.
  const unfollow = state.follow(group);
  /** The serials the activity was last read for. */
  let activityOf = "";
  const loadActivity = async () => {
    const serials = state.phone(group).map((d) => d.serial);
    activityOf = serials.join("\n");
    const lists = await Promise.all(serials.map((serial) => api.activity.listActivity({ serial, pageSize: 50 })));
    activityRows = lists
      .flatMap((l) => l.entries)
      .sort((a, b) => Number(b.id - a.id))
      .map((e) => ({ t: when(e.time), caller: e.caller, command: e.command, outcome: e.outcome, ms: e.durationMs, detail: e.detail }));
    renderActivity();
  };
  const renderActivity = () =>
    replaceChildren(
      activity,
      activityRows.length === 0
        ? h("tr", {}, h("td", { colspan: 6 }, "No routed actions yet."))
        : activityRows.slice(0, 50).map((a) => h("tr", {}, h("td", {}, a.t), h("td", {}, a.caller), h("td", {}, a.command), h("td", { class: a.outcome === "ok" ? "ok" : "bad" }, a.outcome), h("td", {}, `${a.ms} ms`), h("td", {}, a.detail))),
    );
  const render = batched(() => {
    const list = state.phone(group);
    const first = list[0];
    const p = first?.properties;
    const physicalId = p?.physicalId ?? "";
    const lease = physicalId ? state.leases.get(physicalId) : undefined;
    const labels = physicalId ? (state.labels.get(physicalId) ?? {}) : {};
    replaceChildren(
      head,
      h("h1", {}, p?.model ? `${p.manufacturer} ${p.model}` : group),
      h("p", {}, "Physical id ", h("code", {}, physicalId || "(unknown)"), first ? "" : state.phonePending(group) ? " — loading…" : " — not reported by any agent now."),
      h("p", { "data-cell": "lease" }, lease ? `Leased by ${lease.holder} since ${when(lease.acquireTime)} (${ago(lease.acquireTime)}), expires ${when(lease.expireTime)}` : "Not leased."),
      h("p", {}, "Labels: ", Object.keys(labels).length ? Object.entries(labels).map(([k, v]) => h("span", { class: "label-chip" }, `${k}=${v}`)) : "none"),
    );
    replaceChildren(aliases, list.map((d) => h("tr", {}, h("th", { scope: "row" }, d.serial), h("td", {}, d.agentName), h("td", { class: `state state-${d.state}`, title: d.quarantineReason }, d.state), h("td", {}, ago(d.updateTime)))));
    replaceChildren(
      props,
      p
        ? (
            [
              ["Manufacturer", p.manufacturer],
              ["Model", p.model],
              ["Android", p.androidVersion],
              ["API level", String(p.apiLevel || "")],
              ["ABI", p.abi],
              ["ro.serialno", p.serialno],
              ["Boot id", p.bootId],
              ["Identity", p.identityStatus],
              ["Pin label", p.pinLabel],
            ] as const
          ).map(([k, v]) => h("tr", {}, h("th", { scope: "row" }, k), h("td", {}, v)))
        : h("tr", {}, h("td", { colspan: 2 }, "Unknown.")),
    );
    // The newest still bundle of this phone carries its last screenshot.
    const last = [...state.evidence.values()]
      .filter((e) => e.kind === "still" && e.physicalId === physicalId && physicalId !== "" && e.status !== "failed")
      .sort((a, b) => Number((b.createTime?.seconds ?? 0n) - (a.createTime?.seconds ?? 0n)))[0];
    replaceChildren(
      shot,
      last
        ? [h("img", { src: fileUrl(last.evidenceId, "screenshot.png"), alt: `Last screenshot of ${p?.model ?? group}`, loading: "lazy" }), h("figcaption", {}, h("a", { href: `#/evidence/${last.evidenceId}` }, `Evidence ${last.evidenceId.slice(0, 8)}`), ` ${ago(last.createTime)}`)]
        : h("figcaption", {}, "No screenshot captured yet."),
    );
  });
  const offs = [
    state.on("devices", (g) => {
      if (g !== undefined && g !== group) return;
      render();
      // Aliases read after the page opened (or plugged in since) have activity of their own.
      if (state.phone(group).map((d) => d.serial).join("\n") !== activityOf) void loadActivity();
    }),
    state.on("leases", render),
    state.on("labels", render),
    state.on("evidence", render),
    state.on("activity", () => void loadActivity()),
  ];
  render();
  void loadActivity();
  return () => {
    offs.forEach((off) => off());
    unfollow();
  };
};
