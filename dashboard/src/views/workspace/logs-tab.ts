import { ConnectError } from "@connectrpc/connect";
import type { LogLine } from "@farm/shared/gen/farm/v1/logcat_service_pb";
import { api } from "../../api.js";
import { h } from "../../dom.js";
import { lineText, LogRing, matches, type LogFilter } from "./log-ring.js";
import type { WorkspaceTab, WorkspaceTarget, WorkspaceTabView } from "./workspace-tab.js";

/** Rows on the page at most: older matching lines stay in the ring (and the download), not in the DOM. */
const ROWS_SHOWN = 1_000;

/** Logs tabs opened on this page so far: each one's list of packages has an id of its own. */
let datalists = 0;

/** Why a watch ended, for the status line: the server's message (it names the code), or the error's own. */
const why = (err: unknown) => (err instanceof ConnectError ? err.rawMessage : (err as Error).message);

/**
 * The Logs tab: the phone's logcat live, from the coordinator's one stream
 * for the phone (shared with every other viewer); a ring buffer of the
 * newest lines in the browser; level, tag, package and text filters,
 * pause, clear and download. The filters run here, not on the coordinator:
 * the coordinator's one stream per phone is shared by every viewer, each
 * with filters of its own, and a filter changed here applies at once to
 * the lines already kept (no new stream, nothing asked of the phone). Who may read it is the server's call (the lease holder, or
 * an admin): a refusal is shown as it came.
 */
export const logsTab: WorkspaceTab = {
  id: "logs",
  title: "Logs",
  open(initial: WorkspaceTarget): WorkspaceTabView {
    const ring = new LogRing();
    const filter: LogFilter = { level: "V", tag: "", package: "", search: "" };
    /** Packages seen in the log so far, offered by the package filter (bounded like the ring). */
    const seenPackages = new Set<string>();
    let paused = false;
    let dropped = 0;
    let target = initial;
    let watching: AbortController | undefined;
    /** The serial and token of the current (or last failed) watch: not retried until they change. */
    let watchedFor = "";

    const rows = h("div", { class: "log-rows", role: "log", "aria-live": "off", "data-cell": "log-rows" });
    const status = h("p", { class: "count", role: "status", "data-cell": "log-status" });
    const level = h(
      "select",
      {
        "aria-label": "Lowest level",
        onchange: () => {
          filter.level = level.value;
          redraw();
        },
      },
      ...[["V", "Verbose"], ["D", "Debug"], ["I", "Info"], ["W", "Warn"], ["E", "Error"], ["F", "Fatal"]].map(([v, t]) => h("option", { value: v ?? "" }, t ?? "")),
    );
    const tag = h("input", {
      type: "search",
      placeholder: "tag",
      "aria-label": "Tag filter",
      oninput: () => {
        filter.tag = tag.value.trim();
        redraw();
      },
    });
    const packages = h("datalist", { id: `log-packages-${++datalists}` });
    const pkg = h("input", {
      type: "search",
      placeholder: "package",
      "aria-label": "Package filter",
      list: packages.id,
      oninput: () => {
        filter.package = pkg.value.trim();
        redraw();
      },
    });
    const search = h("input", {
      type: "search",
      placeholder: "search",
      "aria-label": "Search the log",
      oninput: () => {
        filter.search = search.value;
        redraw();
      },
    });
    const pause = h("button", {
      type: "button",
      "aria-pressed": "false",
      onclick: () => {
        paused = !paused;
        pause.textContent = paused ? "Resume" : "Pause";
        pause.setAttribute("aria-pressed", String(paused));
        if (!paused) redraw();
        showStatus();
      },
    }, "Pause");
    const clear = h("button", {
      type: "button",
      onclick: () => {
        ring.clear();
        redraw();
      },
    }, "Clear");
    const download = h("button", {
      type: "button",
      onclick: () => {
        const text = ring.all().map(lineText).join("\n") + "\n";
        const a = h("a", { href: URL.createObjectURL(new Blob([text], { type: "text/plain" })), download: `logcat-${target.serial || target.physicalId}.txt` });
        a.click();
        setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
      },
    }, "Download");
    const el = h("section", { class: "workspace-tab logs-tab" }, h("div", { class: "log-tools" }, level, tag, pkg, packages, search, pause, clear, download), status, rows);

    const row = (l: LogLine) => h("div", { class: `log-line level-${l.level || "none"}`, "data-level": l.level, "data-tag": l.tag, "data-package": l.package, title: l.package || "" }, lineText(l));
    const showStatus = (note = "") => {
      status.textContent = note || `${watching ? `Following ${target.serial}` : "Not following"} · ${ring.size} lines kept${dropped ? ` · ${dropped} missed (fell behind)` : ""}${paused ? " · paused" : ""}`;
    };
    /** Everything again, as the filters now say (newest ROWS_SHOWN matching lines). */
    const redraw = () => {
      const shown = ring.all().filter((l) => matches(l, filter)).slice(-ROWS_SHOWN);
      rows.replaceChildren(...shown.map(row));
      rows.scrollTop = rows.scrollHeight;
      showStatus();
    };
    const add = (lines: LogLine[]) => {
      ring.push(lines);
      for (const l of lines) {
        if (!l.package || seenPackages.has(l.package) || seenPackages.size >= 500) continue;
        seenPackages.add(l.package);
        packages.append(h("option", { value: l.package }));
      }
      if (paused) return showStatus();
      const atBottom = rows.scrollTop + rows.clientHeight >= rows.scrollHeight - 4;
      for (const l of lines) if (matches(l, filter)) rows.append(row(l));
      while (rows.childElementCount > ROWS_SHOWN) rows.firstElementChild?.remove();
      if (atBottom) rows.scrollTop = rows.scrollHeight;
      showStatus();
    };

    const stop = () => {
      watching?.abort();
      watching = undefined;
    };
    const watch = async (t: WorkspaceTarget) => {
      stop();
      const abort = new AbortController();
      watching = abort;
      showStatus();
      try {
        for await (const res of api.logcat.watchLogcat({ target: { serial: t.serial } }, { signal: abort.signal, ...(t.leaseToken ? { headers: { "x-farm-lease": t.leaseToken } } : {}) })) {
          dropped += res.dropped;
          add(res.lines);
        }
        if (watching === abort) {
          watching = undefined;
          showStatus("The phone's log stream ended.");
        }
      } catch (err) {
        if (abort.signal.aborted) return;
        if (watching === abort) watching = undefined;
        showStatus(why(err));
      }
    };
    const update = (t: WorkspaceTarget) => {
      target = t;
      const key = `${t.serial}\n${t.leaseToken}\n${t.canAct}`;
      if (!t.serial) {
        stop();
        watchedFor = "";
        return showStatus("No serial of this phone is online.");
      }
      if (key === watchedFor) return;
      watchedFor = key;
      void watch(t);
    };
    update(initial);
    return { el, update, close: stop };
  },
};
