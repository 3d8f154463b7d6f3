import { h, replaceChildren, table } from "../dom.js";
import { ago, when } from "../format.js";
import type { Device } from "@farm/shared/gen/farm/v1/registry_pb";
import { moreButton } from "../more-button.js";
import { batched, type View } from "../view.js";

/** The agents read so far (a page at a time, "More agents" reads the next), by name. */
export const agentsView: View = (root, state) => {
  const body = h("tbody");
  const more = moreButton(state, "agents", "agents");
  root.append(h("h1", {}, "Agents"), table("Agents, online and offline", ["Name", "State", "Transport", "Host", "Version", "adb", "Last heartbeat", "Devices"], body), more.el);
  const render = batched(() => {
    more.update();
    const agents = [...state.agents.values()].sort((a, b) => a.name.localeCompare(b.name));
    const byAgent = new Map<string, Device[]>();
    for (const d of state.devices.values()) byAgent.set(d.agentId, [...(byAgent.get(d.agentId) ?? []), d]);
    const devicesOf = (id: string) => byAgent.get(id) ?? [];
    replaceChildren(
      body,
      agents.length === 0
        ? h("tr", {}, h("td", { colspan: 8 }, "No agents yet."))
        : agents.map((a) => {
          const devices = devicesOf(a.id);
          return h(
            "tr",
            { "data-agent": a.name },
            h("th", { scope: "row" }, a.name),
            h("td", { class: a.online && !a.draining ? "ok" : "bad", title: a.online ? a.drainReason : a.offlineReason }, !a.online ? (a.offlineReason ? `offline (${a.offlineReason})` : "offline") : a.draining ? "draining" : "online"),
            h("td", { class: a.transport === "cleartext" ? "bad" : "" }, a.transport === "cleartext" ? "cleartext (insecure)" : a.transport),
            h("td", {}, a.hostname),
            h("td", {}, a.agentVersion),
            h("td", {}, a.adbVersion),
            h("td", { title: when(a.lastHeartbeatTime) }, ago(a.lastHeartbeatTime)),
            h(
              "td",
              {},
              // The count is the agent's own; the list is of the devices read so far.
              a.deviceCount === 0 && devices.length === 0
                ? "none"
                : h(
                  "details",
                  {},
                  h("summary", {}, `${Math.max(a.deviceCount, devices.length)} device(s)`),
                  h("ul", {}, devices.map((d) => h("li", {}, h("a", { href: `#/devices/${encodeURIComponent(d.properties?.physicalId || `${d.agentId}/${d.serial}`)}` }, d.serial), ` ${d.state}`))),
                  devices.length < a.deviceCount ? h("p", { class: "count" }, `${a.deviceCount - devices.length} more not read yet (Devices, More devices)`) : null,
                ),
            ),
          );
        }),
    );
  });
  const offs = [state.on("agents", render), state.on("devices", render)];
  const tick = setInterval(render, 5_000);
  render();
  return () => {
    offs.forEach((off) => off());
    clearInterval(tick);
  };
};
