import { ConnectError } from "@connectrpc/connect";
import { api } from "../../api.js";
import { h, replaceChildren } from "../../dom.js";
import { bytes } from "../../format.js";
import { appCommand, type AppAction } from "./app-packages.js";
import { uploadApk } from "./apk-upload.js";
import type { WorkspaceTab, WorkspaceTabView, WorkspaceTarget } from "./workspace-tab.js";

const errorText = (err: unknown) => (err instanceof ConnectError ? err.rawMessage : err instanceof Error ? err.message : String(err));

/**
 * The Apps tab, for whoever holds the phone's lease here: drop (or pick) an
 * APK, watch it upload, and it is installed by the routed, journaled
 * InstallApp; the third-party packages (ListPackages, a read) are listed
 * with launch, stop and uninstall (journaled RunShell calls). Every call carries the lease (and the running session, so
 * installs and launches become its steps).
 */
export const appsTab: WorkspaceTab = { id: "apps", title: "Apps", open: openApps };

function openApps(first: WorkspaceTarget): WorkspaceTabView {
  let target = first;
  const note = h("p", { class: "count", "data-cell": "apps-note" });
  const picker = h("input", { type: "file", accept: ".apk,application/vnd.android.package-archive", "aria-label": "Choose an APK" }) as HTMLInputElement;
  const drop = h("div", { class: "drop-zone", "data-cell": "apk-drop" }, "Drop an APK here, or ", h("label", {}, picker));
  const bar = h("progress", { max: 1, value: 0, hidden: true, "aria-label": "Upload progress" }) as HTMLProgressElement;
  const status = h("p", { role: "status", "data-cell": "apps-status" });
  const body = h("tbody");
  const refresh = h("button", { type: "button", onclick: () => void list() }, "Refresh");
  const listing = h(
    "div",
    { class: "table-wrap" },
    h("table", { id: "device-apps" }, h("caption", {}, "Installed apps (third-party) ", refresh), h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Package"), h("th", { scope: "col" }, "Actions"))), body),
  );
  const el = h("div", { class: "apps-tab" }, note, drop, bar, status, listing);
  let busy = false;
  const say = (text: string, bad = false) => {
    status.textContent = text;
    status.className = bad ? "bad" : "";
  };
  const headers = (step: boolean) => ({ "x-farm-lease": target.leaseToken, ...(step && target.sessionId ? { "x-farm-session": target.sessionId } : {}) });
  /** A routed shell command on the leased serial: its stdout, or an error with what the phone said. */
  const shell = async (command: string, step: boolean): Promise<string> => {
    const r = await api.device.runShell({ target: { serial: target.serial }, command }, { headers: headers(step) });
    const out = new TextDecoder().decode(r.stdout);
    if (r.exitCode !== 0) throw new Error(`${command.split(" ")[0]} exited ${r.exitCode}: ${(out + new TextDecoder().decode(r.stderr)).trim().split("\n").pop() ?? ""}`);
    return out;
  };

  const list = async () => {
    if (!target.canAct || !target.serial) return;
    try {
      // A read (ListPackages: not journaled, not a step of the session).
      const names: string[] = [];
      let pageToken = "";
      do {
        const page = await api.device.listPackages({ target: { serial: target.serial }, pageSize: 1000, pageToken }, { headers: headers(false) });
        names.push(...page.packages);
        pageToken = page.nextPageToken;
      } while (pageToken !== "");
      replaceChildren(
        body,
        names.length === 0
          ? h("tr", {}, h("td", { colspan: 2 }, "No third-party apps installed."))
          : names.map((name) =>
            h(
              "tr",
              { "data-package": name },
              h("th", { scope: "row" }, name),
              h("td", { class: "app-actions" }, actionButton("launch", "Launch", name), actionButton("stop", "Stop", name), actionButton("uninstall", "Uninstall", name)),
            )
          ),
      );
    } catch (err) {
      say(`Could not list the apps: ${errorText(err)}`, true);
    }
  };
  const actionButton = (action: AppAction, label: string, name: string) =>
    h("button", {
      type: "button",
      "data-action": action,
      "aria-label": `${label} ${name}`,
      onclick: async () => {
        if (action === "uninstall" && !confirm(`Uninstall ${name} from this phone?`)) return;
        say(`${label}: ${name}…`);
        try {
          await shell(appCommand(action, name), true);
          say(`${label}: ${name} — done.`);
          if (action === "uninstall") await list();
        } catch (err) {
          say(`${label} ${name} failed: ${errorText(err)}`, true);
        }
      },
    }, label);

  const install = async (file: File) => {
    if (busy) return say("An install is already under way.", true);
    if (!target.canAct || !target.serial) return say("Lease the phone here to install an app.", true);
    if (!/\.apk$/i.test(file.name)) return say(`${file.name} is not an .apk file.`, true);
    busy = true;
    bar.hidden = false;
    bar.value = 0;
    try {
      say(`Uploading ${file.name} (${bytes(file.size)})…`);
      const blobId = await uploadApk(file, (f) => {
        bar.value = f;
        say(`Uploading ${file.name}: ${Math.round(f * 100)}%`);
      });
      bar.value = 1;
      say(`Installing ${file.name}…`);
      const r = await api.device.installApp({ target: { serial: target.serial }, blobId }, { headers: headers(true) });
      say(`Installed ${file.name}: ${r.output.trim() || "done"}.`);
      await list();
    } catch (err) {
      say(`Install of ${file.name} failed: ${errorText(err)}`, true);
    } finally {
      busy = false;
      bar.hidden = true;
      picker.value = "";
    }
  };
  picker.addEventListener("change", () => {
    const f = picker.files?.[0];
    if (f) void install(f);
  });
  drop.addEventListener("dragover", (e) => {
    e.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    const f = e.dataTransfer?.files[0];
    if (f) void install(f);
  });

  let listedFor = "";
  const show = () => {
    const may = target.canAct && target.serial !== "";
    note.textContent = may ? "" : target.serial ? "Lease this phone here (above) to install and manage its apps." : "No serial of this phone is online.";
    drop.hidden = !may;
    listing.hidden = !may;
    const key = may ? `${target.serial}\n${target.leaseToken}` : "";
    if (key && key !== listedFor) void list();
    if (!may) replaceChildren(body);
    listedFor = key;
  };
  show();
  return {
    el,
    update: (next) => {
      target = next;
      show();
    },
    close: () => undefined,
  };
}
