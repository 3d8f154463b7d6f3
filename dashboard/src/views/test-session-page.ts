import { Code, ConnectError } from "@connectrpc/connect";
import { SessionStatus, type Session, type SessionStep } from "@farm/shared/gen/farm/v1/session_service_pb";
import { api } from "../api.js";
import { h, replaceChildren } from "../dom.js";
import { when } from "../format.js";
import { newerSession } from "../live-state.js";
import { stepCard, type StepCard } from "../step-card.js";
import { sessionDuration, statusName } from "../test-session-format.js";
import type { View } from "../view.js";

/** Steps read per ListSessionSteps call: the most the coordinator serves. */
const STEP_PAGE = 1000;
/** Sessions with more steps than this open in the compact view. */
const COMPACT_FROM = 30;

/**
 * One recorded session: its facts, then its timeline, a card per step.
 * Steps appended while the page is open, and OCR results, arrive as watch
 * events and are added in place; after the watch (re)connects the timeline
 * is read again, as events during a break are not replayed.
 */
export const testSessionPageView: View = (root, state, id) => {
  const head = h("div", { class: "session-head" }, h("h1", {}, `Session ${id.slice(0, 8)}`), h("p", { role: "status" }, "Loading…"));
  const summary = h("div", { class: "timeline-summary" });
  const timeline = h("ol", { class: "timeline", "aria-label": "Timeline, oldest step first" });
  const empty = h("p", { class: "count", hidden: true }, "No steps yet: actions run with FARM_SESSION set appear here as they happen.");
  /** Compact: one line per step, its images and details opened one at a time. Chosen once the steps are read, unless the user already chose. */
  let compactChosen = false;
  const compact = h("button", {
    type: "button",
    "data-action": "compact",
    "aria-pressed": "false",
    onclick: () => {
      compactChosen = true;
      setCompact(!timeline.classList.contains("compact"));
    },
  }, "Compact view");
  const setCompact = (on: boolean) => {
    timeline.classList.toggle("compact", on);
    compact.setAttribute("aria-pressed", String(on));
  };
  root.append(head, h("h2", {}, "Timeline ", compact), summary, empty, timeline);

  let session: Session | undefined;
  const cards = new Map<number, StepCard>();
  /** Step events that came while the timeline was read: applied after it, in order. */
  let buffered: SessionStep[] | undefined = [];
  let generation = 0;
  let stopped = false;

  const failedSteps = () => [...cards.values()].filter((c) => c.step.result && !c.step.result.ok).map((c) => c.step.sequence);

  const renderHead = () => {
    const s = session;
    if (!s) return;
    const status = statusName(s.status);
    const steps = Math.max(s.stepCount, cards.size);
    const failed = Math.max(s.failedStepCount, failedSteps().length);
    const context = s.context && Object.keys(s.context).length ? s.context : undefined;
    replaceChildren(
      head,
      h("h1", {}, s.name ? `Session: ${s.name}` : `Session ${s.sessionId.slice(0, 8)}`),
      h(
        "dl",
        { class: "facts session-facts" },
        h("dt", {}, "Status"),
        h("dd", { class: `status status-${status}`, "data-cell": "status" }, status),
        h("dt", {}, "Session id"),
        h("dd", {}, h("code", {}, s.sessionId)),
        h("dt", {}, "Device"),
        h("dd", { "data-cell": "device" }, s.physicalId ? h("a", { href: `#/devices/${encodeURIComponent(s.physicalId)}` }, s.serial) : s.serial, s.agentName ? ` on ${s.agentName}` : ""),
        h("dt", {}, "User"),
        h("dd", { "data-cell": "user" }, s.owner),
        h("dt", {}, "Started"),
        h("dd", {}, when(s.createTime)),
        h("dt", {}, "Ended"),
        h("dd", {}, s.endTime ? when(s.endTime) : "still running"),
        h("dt", {}, "Duration"),
        h("dd", { "data-cell": "duration" }, sessionDuration(s)),
        h("dt", {}, "Actions"),
        h("dd", { "data-cell": "actions" }, String(steps), failed ? h("span", { class: "bad" }, ` (${failed} failed)`) : ""),
        h("dt", {}, "OCR"),
        h("dd", {}, s.ocr ? "on: each before screenshot is read" : "off"),
        h("dt", {}, "Lease"),
        h("dd", {}, h("code", {}, s.leaseId.slice(0, 8))),
        ...(context ? [h("dt", {}, "Context"), h("dd", {}, h("pre", { class: "context" }, JSON.stringify(context, null, 2)))] : []),
      ),
    );
  };

  const renderSummary = () => {
    const failed = failedSteps();
    empty.hidden = cards.size > 0 || buffered !== undefined;
    replaceChildren(
      summary,
      failed.length
        ? h(
          "p",
          { class: "errors-summary" },
          h("span", { class: "bad" }, `Failed step${failed.length === 1 ? "" : "s"}: `),
          // Buttons, not #fragment links: the hash is the page's route.
          failed.map((n) =>
            h("button", {
              type: "button",
              class: "link",
              onclick: () => {
                const el = cards.get(n)?.el;
                // Opened in the compact view too: the point of jumping to it is to see it.
                el?.classList.add("open");
                el?.querySelector(".expand")?.setAttribute("aria-expanded", "true");
                el?.scrollIntoView({ block: "start" });
              },
            }, `#${n}`)
          ),
        )
        : null,
    );
  };

  const upsert = (step: SessionStep) => {
    const old = cards.get(step.sequence);
    if (old) return old.update(step);
    const card = stepCard(step);
    cards.set(step.sequence, card);
    // In sequence order: steps may be stored (and arrive) out of order.
    const next = [...cards.values()].filter((c) => c.step.sequence > step.sequence).sort((a, b) => a.step.sequence - b.step.sequence)[0];
    timeline.insertBefore(card.el, next?.el ?? null);
  };

  const offStep = state.onStep((step) => {
    if (step.sessionId !== id) return;
    if (buffered) return void buffered.push(step);
    upsert(step);
    renderHead();
    renderSummary();
  });

  const load = async () => {
    const g = ++generation;
    buffered ??= [];
    try {
      const got = await api.sessions.getSession({ sessionId: id });
      const steps: SessionStep[] = [];
      for (let pageToken = "";;) {
        const page = await api.sessions.listSessionSteps({ sessionId: id, pageSize: STEP_PAGE, pageToken });
        steps.push(...page.steps);
        if (!page.nextPageToken || page.nextPageToken === pageToken) break;
        pageToken = page.nextPageToken;
      }
      if (g !== generation || stopped) return;
      if (got.session) session = newerSession(session, got.session);
      for (const s of steps) upsert(s);
      for (const s of buffered ?? []) upsert(s);
      buffered = undefined;
      // Hundreds of steps read better as lines.
      if (!compactChosen) setCompact(cards.size > COMPACT_FROM);
      document.title = `${session?.name || `Session ${id.slice(0, 8)}`} · farm`;
      renderHead();
      renderSummary();
    } catch (err) {
      if (g !== generation || stopped) return;
      buffered = undefined;
      const notFound = err instanceof ConnectError && err.code === Code.NotFound;
      replaceChildren(head, h("h1", {}, "Session"), h("p", { class: "error", role: "alert" }, notFound ? `There is no session ${id}.` : `The session could not be read: ${err instanceof Error ? err.message : String(err)}`));
    }
  };

  let connection = state.connection;
  const offs = [
    state.on("testSessions", (key) => {
      if (key !== id) return;
      const s = state.testSessions.get(id);
      if (!s || !session) return;
      session = newerSession(session, s);
      renderHead();
    }),
    state.on("connection", () => {
      const was = connection;
      connection = state.connection;
      // Back on the stream (or on it for the first time since the page opened): what happened meanwhile is read again.
      if (connection === "live" && was !== "live") void load();
    }),
  ];
  const tick = setInterval(() => {
    if (session?.status !== SessionStatus.RUNNING) return;
    const cell = head.querySelector("[data-cell=\"duration\"]");
    if (cell) cell.textContent = sessionDuration(session);
  }, 1_000);
  void load();
  return () => {
    stopped = true;
    offStep();
    offs.forEach((off) => off());
    clearInterval(tick);
  };
};
