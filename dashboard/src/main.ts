import "./styles.css";
import { api, me, signOut, type Me } from "./api.js";
import { h, replaceChildren } from "./dom.js";
import { LiveState } from "./live-state.js";
import type { View } from "./view.js";
import { signInView } from "./views/sign-in.js";
import { overviewView } from "./views/overview.js";
import { agentsView } from "./views/agents.js";
import { devicesView } from "./views/devices.js";
import { devicePageView } from "./views/device-page.js";
import { tabPageView } from "./views/workspace/tab-page.js";
import { leasesView } from "./views/leases.js";
import { sessionsView } from "./views/sessions.js";
import { testSessionsView } from "./views/test-sessions.js";
import { testSessionPageView } from "./views/test-session-page.js";
import { evidenceView } from "./views/evidence-list.js";
import { bundleView } from "./views/bundle-page.js";
import { activityView } from "./views/activity.js";

const routes: [RegExp, View, string][] = [
  [/^#\/overview$/, overviewView, "Overview"],
  [/^#\/agents$/, agentsView, "Agents"],
  [/^#\/devices$/, devicesView, "Devices"],
  [/^#\/devices\/(.+)$/, devicePageView, "Device"],
  // One workspace tab on its own (Logs, Shell, Files), until the device workspace holds them.
  [/^#\/device\/(.+\/[a-z]+)$/, tabPageView, "Device tab"],
  [/^#\/leases$/, leasesView, "Leases"],
  // Screen recordings; #/sessions is their old address, kept for bookmarks (test sessions are #/test-sessions).
  [/^#\/(?:recordings|sessions)$/, sessionsView, "Recordings"],
  [/^#\/test-sessions\/([^?]+)$/, testSessionPageView, "Test session"],
  // `?device=&user=&status=` presets the filters.
  [/^#\/test-sessions(?:\?(.*))?$/, testSessionsView, "Test sessions"],
  [/^#\/evidence$/, evidenceView, "Evidence"],
  [/^#\/evidence\/(.+)$/, bundleView, "Bundle"],
  [/^#\/activity$/, activityView, "Activity"],
];

const main = document.getElementById("main") as HTMLElement;
const nav = document.getElementById("nav") as HTMLElement;
const user = document.getElementById("user") as HTMLElement;
const connection = document.getElementById("connection") as HTMLElement;

let stopView: (() => void) | undefined;
let stopState: AbortController | undefined;

function route(state: LiveState): void {
  const hash = location.hash || "#/overview";
  const match = routes.map(([re, view, title]) => ({ m: re.exec(hash), view, title })).find((r) => r.m);
  stopView?.();
  main.replaceChildren();
  if (!match?.m) {
    location.hash = "#/overview";
    return;
  }
  for (const a of nav.querySelectorAll("a")) {
    if (hash.startsWith(a.getAttribute("href") ?? "\u0000")) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  document.title = `${match.title} · farm`;
  stopView = match.view(main, state, decodeURIComponent(match.m[1] ?? ""));
}

function signedIn(who: Me): void {
  const state = new LiveState(api, who);
  stopState = new AbortController();
  nav.hidden = false;
  replaceChildren(user, `${who.name}${who.role ? ` (${who.role})` : ""} `, h("button", { type: "button", onclick: () => void signOut().then(signedOut) }, "Sign out"));
  const showConnection = () => {
    connection.textContent = state.connection === "live" ? "" : state.connection === "connecting" ? "Connecting…" : "Connection lost; reconnecting…";
  };
  state.on("connection", showConnection);
  showConnection();
  void state.run(stopState.signal, signedOut);
  window.onhashchange = () => route(state);
  route(state);
}

function signedOut(): void {
  stopState?.abort();
  stopView?.();
  stopView = undefined;
  window.onhashchange = null;
  nav.hidden = true;
  user.replaceChildren();
  connection.textContent = "";
  main.replaceChildren();
  stopView = signInView(main, signedIn);
}

void me().then((who) => (who ? signedIn(who) : signedOut()));
