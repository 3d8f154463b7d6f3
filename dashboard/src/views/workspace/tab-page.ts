import { h } from "../../dom.js";
import { batched, type View } from "../../view.js";
import { filesTab } from "./files-tab.js";
import { logsTab } from "./logs-tab.js";
import { shellTab } from "./shell-tab.js";
import type { WorkspaceTab, WorkspaceTarget } from "./workspace-tab.js";

/** The tabs this page can show on their own, by id. */
const tabs: readonly WorkspaceTab[] = [logsTab, shellTab, filesTab];

/** Where the device page keeps the lease token this browser tab took (device-screen.ts). */
const tokenKey = (physicalId: string) => `farm.lease.${physicalId}`;

/**
 * One workspace tab on a page of its own, `#/device/<physical id>/<tab>`:
 * the tab as the device workspace will hold it, with the target built from
 * the live state (the phone's online serial, the lease token this browser
 * tab holds). The page's heading links back to the device page.
 */
export const tabPageView: View = (root, state, param) => {
  const cut = param.lastIndexOf("/");
  const physicalId = param.slice(0, cut);
  const tab = tabs.find((t) => t.id === param.slice(cut + 1));
  if (!tab || !physicalId) {
    root.append(h("p", { class: "error" }, `No such tab: ${param}`));
    return () => {};
  }
  const unfollow = state.follow(physicalId);
  const target = (): WorkspaceTarget => {
    const lease = state.leases.get(physicalId);
    const leaseToken = lease ? (sessionStorage.getItem(tokenKey(physicalId)) ?? "") : "";
    return {
      physicalId,
      serial: state.phone(physicalId).find((d) => d.state === "device")?.serial ?? "",
      leaseToken,
      sessionId: "",
      canAct: leaseToken !== "",
    };
  };
  const view = tab.open(target());
  root.append(h("h2", {}, h("a", { href: `#/devices/${encodeURIComponent(physicalId)}` }, physicalId), ` · ${tab.title}`), view.el);
  const update = batched(() => view.update(target()));
  const offs = [state.on("devices", update), state.on("leases", update)];
  update();
  return () => {
    for (const off of offs) off();
    unfollow();
    view.close();
  };
};
