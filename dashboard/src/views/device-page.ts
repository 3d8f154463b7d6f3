import { h, replaceChildren } from "../dom.js";
import { statusName } from "../test-session-format.js";
import { batched, type View } from "../view.js";
import { deviceScreen } from "./device-screen.js";
import { leaseControls } from "./workspace/lease-controls.js";
import { leaseTokenOf } from "./workspace/lease-token.js";
import { tabStrip } from "./workspace/tab-strip.js";
import type { WorkspaceTarget } from "./workspace/workspace-tab.js";
import { workspaceTabs } from "./workspace/workspace-tabs.js";

/**
 * One physical device as a place to work: its name and lease bar on top,
 * the live screen as large as the window allows, and beside it the screen's
 * buttons, the session banner and the tabs (Info, Apps, …). At 1280×800 the
 * screen and its controls need no scrolling; a narrow window stacks them.
 */
export const devicePageView: View = (root, state, group) => {
  const title = h("h1");
  const facts = h("p", { class: "count", "data-cell": "device-facts" });
  // Its aliases are read on their own: the device list may not have read this phone.
  const unfollow = state.follow(group);
  const screen = deviceScreen(state, group);
  const serialNow = () => state.phone(group).find((d) => d.state === "device")?.serial ?? "";
  /** Your running recorded session on this phone, if any. */
  const sessionNow = () => {
    for (const s of state.testSessions.values()) {
      if (s.physicalId === group && s.owner === state.me?.name && !s.endTime && statusName(s.status) === "running") return s.sessionId;
    }
    return "";
  };
  const targetNow = (): WorkspaceTarget => {
    const leaseToken = state.leases.has(group) ? leaseTokenOf(group) : "";
    return { physicalId: group, serial: serialNow(), leaseToken, sessionId: sessionNow(), canAct: leaseToken !== "" };
  };
  let target = targetNow();
  const tabs = tabStrip(workspaceTabs(state), target);
  const lease = leaseControls(state, group, () => refresh());
  root.append(
    h(
      "div",
      { class: "workspace" },
      h("div", { class: "ws-head" }, h("div", { class: "ws-title" }, title, facts), lease.el),
      h("div", { class: "ws-screen" }, screen.el),
      h("div", { class: "ws-side" }, screen.side, tabs.el),
    ),
  );
  const renderHead = () => {
    const list = state.phone(group);
    const p = list[0]?.properties;
    title.textContent = p?.model ? `${p.manufacturer} ${p.model}` : group;
    const serials = list.map((d) => d.serial).join(", ");
    facts.textContent = list.length > 0
      ? `${serials}${p?.androidVersion ? ` · Android ${p.androidVersion}` : ""}${p?.physicalId ? "" : " · identity not read yet"}`
      : state.phonePending(group)
      ? "loading…"
      : "Not reported by any agent now.";
  };
  const refresh = batched(() => {
    renderHead();
    lease.render();
    screen.render();
    const next = targetNow();
    if (JSON.stringify(next) !== JSON.stringify(target)) {
      target = next;
      tabs.update(next);
    }
  });
  const offs = [
    state.on("devices", (g) => {
      if (g === undefined || g === group) refresh();
    }),
    // A session of yours starting or ending here changes where the screen's input goes.
    state.on("testSessions", refresh),
    state.on("leases", refresh),
    state.on("connection", refresh),
  ];
  refresh();
  // The countdown moves on.
  const tick = setInterval(() => lease.render(), 1_000);
  return () => {
    offs.forEach((off) => off());
    clearInterval(tick);
    screen.stop();
    tabs.close();
    unfollow();
  };
};
