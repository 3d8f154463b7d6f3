import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { h, replaceChildren, table } from "../dom.js";
import { when } from "../format.js";
import { moreButton } from "../more-button.js";
import { batched, type View } from "../view.js";

const LIVE = new Set(["starting", "recording", "finalizing"]);

export const sessionsView: View = (root, state) => {
  const body = h("tbody");
  const more = moreButton(state, "sessions", "recordings");
  root.append(h("h1", {}, "Recordings"), table("Screen recordings, newest first", ["Recording", "Status", "Device", "Agent", "Started", "Duration", "Stop reason", "Bundle"], body), more.el);
  const render = batched(() => {
    more.update();
    const sessions = [...state.sessions.values()].sort((a, b) => Number((b.createTime?.seconds ?? 0n) - (a.createTime?.seconds ?? 0n)));
    replaceChildren(
      body,
      sessions.length === 0
        ? h("tr", {}, h("td", { colspan: 8 }, "No recordings yet."))
        : sessions.map((s) => {
          let m: EvidenceManifest | null = null;
          try {
            m = s.manifestJson ? (JSON.parse(s.manifestJson) as EvidenceManifest) : null;
          } catch {
            m = null;
          }
          const v = m?.video;
          // While recording, the duration so far ticks from the start time.
          const seconds = LIVE.has(s.status) && s.createTime ? Math.round((Date.now() - timestampDate(s.createTime).getTime()) / 1000) : v?.hostDurationMs ? Math.round(v.hostDurationMs / 1000) : null;
          return h(
            "tr",
            { "data-recording": s.sessionId },
            h("th", { scope: "row" }, h("code", {}, s.sessionId.slice(0, 8))),
            h("td", { class: `status status-${s.status}`, "data-cell": "status" }, s.status, s.code ? ` (${s.code})` : ""),
            h("td", {}, s.serial),
            h("td", {}, s.agentName),
            h("td", {}, when(s.createTime)),
            h("td", {}, seconds === null ? "" : `${seconds} s${v ? ` of ${v.requestedDurationSeconds} s` : ""}`),
            h("td", {}, v?.stopReason ?? ""),
            h("td", {}, s.stored ? h("a", { href: `#/evidence/${s.sessionId}` }, "open") : ""),
          );
        }),
    );
  });
  const off = state.on("sessions", render);
  const tick = setInterval(render, 1_000);
  render();
  return () => {
    off();
    clearInterval(tick);
  };
};
