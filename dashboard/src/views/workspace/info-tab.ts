import type { Session } from "@farm/shared/gen/farm/v1/session_service_pb";
import { api, fileUrl } from "../../api.js";
import { h, replaceChildren, table } from "../../dom.js";
import { ago, when } from "../../format.js";
import type { LiveState } from "../../live-state.js";
import { activityDetail, sessionDuration, sessionHref, statusName } from "../../test-session-format.js";
import { batched } from "../../view.js";
import { deviceTunnels } from "../device-tunnels.js";
import type { WorkspaceTab, WorkspaceTabView } from "./workspace-tab.js";

/** Test sessions shown here; the rest are on the sessions page. */
const SESSIONS_SHOWN = 10;
/** Activity rows read per alias and page. */
const ACTIVITY_PAGE = 50;

interface ActivityRow {
  id: bigint;
  t: string;
  caller: string;
  command: string;
  outcome: string;
  ms: number;
  detail: string;
}

/**
 * The Info tab: the phone's properties, aliases, labels, last screenshot,
 * remote adb tunnels, test sessions and recent activity (a page at a time).
 * The page follows the phone (state.follow); this tab reads what it shows.
 */
export function infoTab(state: LiveState): WorkspaceTab {
  return { id: "info", title: "Info", open: (target) => openInfo(state, target.physicalId) };
}

function openInfo(state: LiveState, group: string): WorkspaceTabView {
  const props = h("tbody");
  const aliases = h("tbody");
  const labelsEl = h("p", { "data-cell": "labels" });
  const activity = h("tbody");
  const olderActivity = h("button", { type: "button", hidden: true, onclick: () => void loadActivity(true) }, "Older activity");
  const shot = h("figure", { class: "last-shot" });
  const testSessions = h("tbody");
  const allSessions = h("p", { class: "count" });
  // Tunnels are read with the phone's aliases (state.follow), by its physical id: the page's key.
  const tunnels = deviceTunnels(state, group);
  const renderTunnels = batched(tunnels.render);
  const el = h(
    "div",
    { class: "info-tab" },
    labelsEl,
    h("div", { class: "columns" }, h("div", {}, table("Aliases (adb serials)", ["Serial", "Agent", "State", "Updated"], aliases), table("Properties", ["Property", "Value"], props)), shot),
    tunnels.el,
    h("div", { id: "device-test-sessions" }, table("Test sessions on this device, newest first", ["Session", "Status", "User", "Actions", "Started", "Duration"], testSessions), allSessions),
    table("Recent activity on this device", ["Time", "Caller", "Command", "Outcome", "Duration", "Detail"], activity),
    olderActivity,
  );

  let activityRows: ActivityRow[] = [];
  /** The serials the activity was last read for, and each one's next (older) page. */
  let activityOf = "";
  const activityNext = new Map<string, string>();
  const loadActivity = async (older = false) => {
    const serials = state.phone(group).map((d) => d.serial);
    const key = serials.join("\n");
    if (!older) activityNext.clear();
    const wanted = older ? serials.filter((s) => activityNext.get(s)) : serials;
    activityOf = key;
    const lists = await Promise.all(wanted.map((serial) => api.activity.listActivity({ serial, pageSize: ACTIVITY_PAGE, pageToken: older ? (activityNext.get(serial) ?? "") : "" }).then((l) => ({ serial, l }))));
    if (activityOf !== key) return;
    for (const { serial, l } of lists) activityNext.set(serial, l.nextPageToken);
    const rows = lists.flatMap(({ l }) => l.entries).map((e) => ({ id: e.id, t: when(e.time), caller: e.caller, command: e.command, outcome: e.outcome, ms: e.durationMs, detail: e.detail }));
    const seen = new Set((older ? activityRows : []).map((r) => r.id));
    activityRows = [...(older ? activityRows : []), ...rows.filter((r) => !seen.has(r.id))].sort((a, b) => Number(b.id - a.id));
    renderActivity();
  };
  const renderActivity = () => {
    replaceChildren(
      activity,
      activityRows.length === 0
        ? h("tr", {}, h("td", { colspan: 6 }, "No routed actions yet."))
        : activityRows.map((a) =>
          h("tr", {}, h("td", {}, a.t), h("td", {}, a.caller), h("td", {}, a.command), h("td", { class: a.outcome === "ok" ? "ok" : "bad" }, a.outcome), h("td", {}, `${a.ms} ms`), h("td", {}, ...activityDetail(a.command, a.detail)))
        ),
    );
    olderActivity.hidden = ![...activityNext.values()].some((t) => t !== "");
  };

  /** The phone's newest sessions, read by its physical id (the sessions list may not have read them). */
  let sessionRows: Session[] = [];
  let sessionsOf = "";
  let sessionsMore = false;
  const loadSessions = async () => {
    const physicalId = state.phone(group)[0]?.properties?.physicalId ?? "";
    sessionsOf = physicalId;
    if (!physicalId) return renderSessions();
    const res = await api.sessions.listSessions({ physicalId, pageSize: SESSIONS_SHOWN });
    if (sessionsOf !== physicalId) return;
    sessionRows = res.sessions;
    sessionsMore = res.nextPageToken !== "";
    renderSessions();
  };
  const renderSessions = () => {
    replaceChildren(
      testSessions,
      sessionRows.length === 0
        ? h("tr", {}, h("td", { colspan: 6 }, sessionsOf ? "No test sessions on this device." : "Sessions are listed once the device's identity is read."))
        : sessionRows.map((s0) => {
          // The live copy, when the sessions list holds it, has the newest counts.
          const s = state.testSessions.get(s0.sessionId) ?? s0;
          const status = statusName(s.status);
          return h(
            "tr",
            { "data-test-session": s.sessionId },
            h("th", { scope: "row" }, h("a", { href: sessionHref(s.sessionId) }, s.name || s.sessionId.slice(0, 8))),
            h("td", { class: `status status-${status}` }, status),
            h("td", {}, s.owner),
            h("td", {}, String(s.stepCount), s.failedStepCount ? ` (${s.failedStepCount} failed)` : ""),
            h("td", {}, when(s.createTime)),
            h("td", {}, sessionDuration(s)),
          );
        }),
    );
    replaceChildren(
      allSessions,
      sessionsOf ? h("a", { href: `#/test-sessions?device=${encodeURIComponent(sessionsOf)}` }, sessionsMore ? `All test sessions on this device (more than ${SESSIONS_SHOWN})` : "Test sessions on this device, with filters") : "",
    );
  };
  let sessionReload: ReturnType<typeof setTimeout> | undefined;
  const reloadSessionsSoon = () => {
    clearTimeout(sessionReload);
    sessionReload = setTimeout(() => void loadSessions().catch(() => undefined), 200);
  };

  const render = batched(() => {
    const list = state.phone(group);
    const p = list[0]?.properties;
    const physicalId = p?.physicalId ?? "";
    const lease = physicalId ? state.leases.get(physicalId) : undefined;
    const labels = physicalId ? (state.labels.get(physicalId) ?? {}) : {};
    replaceChildren(labelsEl, "Labels: ", Object.keys(labels).length ? Object.entries(labels).map(([k, v]) => h("span", { class: "label-chip" }, `${k}=${v}`)) : "none");
    replaceChildren(aliases, list.map((d) => h("tr", {}, h("th", { scope: "row" }, d.serial), h("td", {}, d.agentName), h("td", { class: `state state-${d.state}`, title: d.quarantineReason }, d.state), h("td", {}, ago(d.updateTime)))));
    replaceChildren(
      props,
      p
        ? (
          [
            ["Physical id", physicalId],
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
    // A leased phone's screen is its holder's: others see who holds it, not what the holder's last capture shows.
    const othersLease = lease !== undefined && !state.me?.admin && lease.holder !== state.me?.name;
    replaceChildren(
      shot,
      othersLease
        ? h("figcaption", { "data-cell": "shot-leased" }, `Leased by ${lease.holder}: its screen is theirs while they hold it.`)
        : last
        ? [
          h("img", { src: fileUrl(last.evidenceId, "screenshot.png"), alt: `Last screenshot of ${p?.model ?? group}`, loading: "lazy" }),
          h("figcaption", {}, h("a", { href: `#/evidence/${last.evidenceId}` }, `Evidence ${last.evidenceId.slice(0, 8)}`), ` ${ago(last.createTime)}`),
        ]
        : h("figcaption", {}, "No screenshot captured yet."),
    );
  });

  const offs = [
    state.on("devices", (g) => {
      if (g !== undefined && g !== group) return;
      render();
      // Aliases read after the page opened (or plugged in since) have activity of their own.
      if (state.phone(group).map((d) => d.serial).join("\n") !== activityOf) void loadActivity().catch(() => undefined);
      if ((state.phone(group)[0]?.properties?.physicalId ?? "") !== sessionsOf) reloadSessionsSoon();
    }),
    state.on("testSessions", (id) => {
      const s = id === undefined ? undefined : state.testSessions.get(id);
      // A new session of this phone, or one shown here that changed.
      if (id === undefined || (s && s.physicalId === sessionsOf && !sessionRows.some((r) => r.sessionId === id))) reloadSessionsSoon();
      else if (sessionRows.some((r) => r.sessionId === id)) renderSessions();
    }),
    state.on("leases", render),
    state.on("labels", render),
    state.on("evidence", render),
    state.on("activity", () => void loadActivity().catch(() => undefined)),
    state.on("tunnels", (physicalId) => {
      if (physicalId === undefined || physicalId === group) renderTunnels();
    }),
  ];
  render();
  tunnels.render();
  void loadActivity().catch(() => undefined);
  void loadSessions().catch(() => undefined);
  const tick = setInterval(() => {
    if (sessionRows.some((s) => !(state.testSessions.get(s.sessionId) ?? s).endTime)) renderSessions();
    // "Since" moves on.
    if (state.tunnelsOn(group).length > 0) renderTunnels();
  }, 1_000);
  return {
    el,
    update: () => undefined,
    close: () => {
      offs.forEach((off) => off());
      clearInterval(tick);
      clearTimeout(sessionReload);
    },
  };
}
