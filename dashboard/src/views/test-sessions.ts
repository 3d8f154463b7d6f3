import { SessionStatus, type Session } from "@farm/shared/gen/farm/v1/session_service_pb";
import { h, replaceChildren, table } from "../dom.js";
import { when } from "../format.js";
import { moreButton } from "../more-button.js";
import { sessionDuration, sessionHref, STATUS_NAMES, statusName } from "../test-session-format.js";
import { batched, type View } from "../view.js";

function newestFirst(a: Session, b: Session): number {
  const d = Number((b.createTime?.seconds ?? 0n) - (a.createTime?.seconds ?? 0n)) || (b.createTime?.nanos ?? 0) - (a.createTime?.nanos ?? 0);
  return d || (a.sessionId < b.sessionId ? 1 : a.sessionId > b.sessionId ? -1 : 0);
}

/**
 * Recorded test sessions, live: started and ended by watch events, their
 * action counts following their steps. The filters apply to the sessions
 * loaded ("More sessions" reads older ones); `?device=&user=&status=` in the
 * hash presets them (the device page links here that way).
 */
export const testSessionsView: View = (root, state, query) => {
  const params = new URLSearchParams(query);
  const status = h("select", { id: "ts-status" }, h("option", { value: "" }, "any"), STATUS_NAMES.map(([, name]) => h("option", { value: name }, name)));
  status.value = STATUS_NAMES.some(([, n]) => n === params.get("status")) ? (params.get("status") as string) : "";
  const device = h("input", { id: "ts-device", type: "search", placeholder: "serial or physical id", value: params.get("device") ?? "" });
  const user = h("input", { id: "ts-user", type: "search", placeholder: "token name", value: params.get("user") ?? "" });
  const body = h("tbody");
  const count = h("p", { class: "count", role: "status" });
  const more = moreButton(state, "testSessions", "sessions");
  root.append(
    h("h1", {}, "Test sessions"),
    h(
      "form",
      { class: "filters", role: "search", onsubmit: (e: Event) => e.preventDefault() },
      h("label", { for: "ts-status" }, "Status"),
      status,
      h("label", { for: "ts-device" }, "Device"),
      device,
      h("label", { for: "ts-user" }, "User"),
      user,
    ),
    count,
    h("div", { id: "test-sessions" }, table("Recorded test sessions, newest first (filters apply to the sessions loaded)", ["Session", "Device", "User", "Status", "Actions", "Started", "Duration"], body)),
    more.el,
  );
  /** Duration cells of running sessions, ticked every second without redrawing the rows. */
  let running: { s: Session; cell: HTMLElement }[] = [];
  const render = batched(() => {
    more.update();
    const d = device.value.trim().toLowerCase();
    const u = user.value.trim().toLowerCase();
    const all = [...state.testSessions.values()];
    const rows = all
      .filter((s) => (!status.value || statusName(s.status) === status.value) && (!d || s.serial.toLowerCase().includes(d) || s.physicalId.toLowerCase() === d) && (!u || s.owner.toLowerCase().includes(u)))
      .sort(newestFirst);
    count.textContent = state.loaded ? `${rows.length} of ${all.length}${state.nextPage.testSessions ? "+" : ""} sessions` : "Loading…";
    running = [];
    replaceChildren(
      body,
      rows.length === 0
        ? h("tr", {}, h("td", { colspan: 7 }, all.length === 0 ? "No test sessions yet." : "No sessions match."))
        : rows.map((s) => {
          const name = statusName(s.status);
          const dur = h("td", { "data-cell": "duration" }, sessionDuration(s));
          if (s.status === SessionStatus.RUNNING) running.push({ s, cell: dur });
          return h(
            "tr",
            { "data-test-session": s.sessionId },
            h("th", { scope: "row" }, h("a", { href: sessionHref(s.sessionId), title: s.sessionId }, s.name || s.sessionId.slice(0, 8))),
            h("td", { "data-cell": "device" }, s.serial, s.agentName ? h("span", { class: "count" }, ` on ${s.agentName}`) : null),
            h("td", { "data-cell": "user" }, s.owner),
            h("td", { class: `status status-${name}`, "data-cell": "status" }, name),
            h("td", { "data-cell": "actions" }, String(s.stepCount), s.failedStepCount ? h("span", { class: "bad" }, ` (${s.failedStepCount} failed)`) : null),
            h("td", {}, when(s.createTime)),
            dur,
          );
        }),
    );
  });
  for (const el of [device, user]) el.addEventListener("input", render);
  status.addEventListener("change", render);
  const off = state.on("testSessions", render);
  const tick = setInterval(() => {
    for (const r of running) r.cell.textContent = sessionDuration(r.s);
  }, 1_000);
  render();
  return () => {
    off();
    clearInterval(tick);
  };
};
