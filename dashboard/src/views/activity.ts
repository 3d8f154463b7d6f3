import { h, replaceChildren, table } from "../dom.js";
import { when } from "../format.js";
import { batched, type View } from "../view.js";

export const activityView: View = (root, state) => {
  const body = h("tbody");
  root.append(h("h1", {}, "Activity"), table("Routed actions, newest first", ["Time", "Caller", "Command", "Device", "Outcome", "Duration", "Lease", "Detail"], body));
  const render = batched(() =>
    replaceChildren(
      body,
      state.activity.length === 0
        ? h("tr", {}, h("td", { colspan: 8 }, "No routed actions yet."))
        : state.activity.map((a) =>
            h(
              "tr",
              {},
              h("td", {}, when(a.time)),
              h("td", {}, a.caller),
              h("th", { scope: "row" }, a.command),
              h("td", {}, a.serial),
              h("td", { class: a.outcome === "ok" ? "ok" : "bad" }, a.outcome),
              h("td", {}, `${a.durationMs} ms`),
              h("td", {}, a.leaseId ? a.leaseId.slice(0, 8) : ""),
              h("td", {}, a.detail),
            ),
          ),
    ),
  );
  const off = state.on("activity", render);
  render();
  return off;
};
