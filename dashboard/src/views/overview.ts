import { SessionStatus } from "@farm/shared/gen/farm/v1/session_service_pb";
import { h, replaceChildren } from "../dom.js";
import { batched, type View } from "../view.js";
import { isFailure, readableAction } from "../action-names.js";

const RECENT = 20;
/** A device state as the count's label reads it: "2 devices online", not "2 devices device". */
const STATE_WORDS: Record<string, string> = { device: "online", "agent-offline": "on an offline agent" };

export const overviewView: View = (root, state) => {
  const body = h("div", { class: "cards" });
  const failures = h("ul", { class: "failures" });
  root.append(h("h1", {}, "Overview"), body, h("h2", {}, "Recent failures"), failures);
  const render = batched(() => {
    const agents = [...state.agents.values()];
    const byState = new Map<string, number>();
    for (const d of state.devices.values()) byState.set(d.state, (byState.get(d.state) ?? 0) + 1);
    // Devices are read a page at a time: with more pages, the agents' own counts give the total, and the
    // counts by state (of the devices read) are lower bounds.
    const allRead = !state.nextPage.devices && !state.deviceState;
    const total = allRead ? state.devices.size : `${agents.reduce((n, a) => n + a.deviceCount, 0)}${state.nextPage.agents ? "+" : ""}`;
    const partial = allRead ? "" : "+";
    const recording = [...state.sessions.values()].filter((s) => ["starting", "recording", "finalizing"].includes(s.status)).length;
    const card = (label: string, value: string | number, id: string) => h("div", { class: "card", "data-metric": id }, h("span", { class: "value" }, value), h("span", { class: "label" }, label));
    replaceChildren(
      body,
      card("agents online", `${agents.filter((a) => a.online).length} / ${agents.length}`, "agents"),
      card("devices", total, "devices"),
      ...[...byState.entries()].sort().map(([s, n]) => card(`${Number(n) === 1 ? "device" : "devices"} ${STATE_WORDS[s] ?? s}`, `${n}${partial}`, `devices-${s}`)),
      card("active leases", state.leases.size, "leases"),
      card("waiting for a device", state.queue.length, "queue"),
      card("recordings in progress", recording, "recordings"),
      // Sessions are read a page at a time, newest first: the running ones are on the first page.
      card("test sessions running", [...state.testSessions.values()].filter((s) => s.status === SessionStatus.RUNNING).length, "test-sessions"),
      // Bundles are read a page at a time: with more pages, the count is a lower bound.
      card("evidence bundles", `${state.evidence.size}${state.nextPage.evidence ? "+" : ""}`, "evidence"),
    );
    const failed = [
      // A tunnel closed or a call cancelled on purpose is not a failure.
      ...state.activity.filter((a) => isFailure(a.outcome)).map((a) => ({ t: Number(a.time?.seconds ?? 0n), text: `${readableAction(a.command)} on ${a.serial} by ${a.caller}: ${a.outcome}` })),
      ...[...state.evidence.values()].filter((e) => e.status !== "complete").map((e) => ({ t: Number(e.createTime?.seconds ?? 0n), text: `${e.kind} evidence ${e.evidenceId.slice(0, 8)} on ${e.serial}: ${e.status}` })),
      ...[...state.sessions.values()].filter((s) => s.status === "failed" || s.status === "partial").map((s) => ({
        t: Number(s.updateTime?.seconds ?? 0n),
        text: `recording ${s.sessionId.slice(0, 8)} on ${s.serial}: ${s.status}${s.code ? ` (${s.code})` : ""}`,
      })),
    ]
      .sort((a, b) => b.t - a.t)
      .slice(0, RECENT);
    replaceChildren(failures, failed.length ? failed.map((f) => h("li", {}, h("time", {}, new Date(f.t * 1000).toISOString().replace("T", " ").slice(0, 19)), " ", f.text)) : h("li", {}, "None."));
  });
  const offs = (["agents", "devices", "leases", "queue", "sessions", "testSessions", "evidence", "activity"] as const).map((t) => state.on(t, render));
  render();
  return () => offs.forEach((off) => off());
};
