import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { rulesOf } from "@farm/shared/method-rules";
import { h, replaceChildren, table } from "../dom.js";
import { when } from "../format.js";
import { moreButton } from "../more-button.js";
import { activityDetail } from "../test-session-format.js";
import { changeOf, readableAction } from "../action-names.js";
import { batched, type View } from "../view.js";

export const activityView: View = (root, state) => {
  const body = h("tbody");
  const more = moreButton(state, "activity", "activity");
  root.append(h("h1", {}, "Activity"), table("Routed actions, newest first", ["Time", "Caller", "Command", "Device", "Outcome", "Duration", "Lease", "Detail"], body), more.el);
  const render = batched(() => {
    more.update();
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
            h("th", { scope: "row", title: readableAction(a.command) }, a.command, ...effect(a.command, a.outcome)),
            h("td", {}, a.serial),
            h("td", { class: a.outcome === "ok" ? "ok" : "bad" }, a.outcome),
            h("td", {}, `${a.durationMs} ms`),
            h("td", {}, a.leaseId ? a.leaseId.slice(0, 8) : ""),
            h("td", {}, ...activityDetail(a.command, a.detail)),
          )
        ),
    );
  });
  const off = state.on("activity", render);
  render();
  return off;
};

/** Device calls are logged by method name: their rules in the schema say whether they changed the phone. */
const deviceMethods = new Map(DeviceService.methods.map((m) => [m.localName, rulesOf(m)]));

function effect(command: string, outcome: string): HTMLElement[] {
  const rules = deviceMethods.get(command);
  if (rules?.deviceChange) {
    // What it did, as far as its outcome tells: a tap on an element that was not there changed nothing.
    const change = changeOf(outcome);
    if (change === "changed") return [h("span", { class: "tag change", title: "a journaled change to the phone" }, "changed phone")];
    if (change === "unknown") return [h("span", { class: "tag change", title: "it failed after it may have reached the phone" }, "may have changed phone")];
    return [h("span", { class: "tag", title: "refused before it reached the phone" }, "no change")];
  }
  if (rules?.readOnly) return [h("span", { class: "tag", title: "changed nothing" }, "read")];
  return [];
}
