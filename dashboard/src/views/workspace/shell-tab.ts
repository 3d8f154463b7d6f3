import "@xterm/xterm/css/xterm.css";
import { ConnectError } from "@connectrpc/connect";
import type { Terminal } from "@xterm/xterm";
import { api } from "../../api.js";
import { h } from "../../dom.js";
import type { WorkspaceTab, WorkspaceTarget, WorkspaceTabView } from "./workspace-tab.js";

/** Input bytes one SendShellInput carries at most (the coordinator's cap). */
const INPUT_CHUNK_BYTES = 16 * 1024;
/** Typed bytes waiting to be sent at most: a terminal that cannot keep up loses keys rather than memory. */
const INPUT_PENDING_MAX_BYTES = 256 * 1024;

/** xterm.js is a chunk of its own (most of the dashboard's bytes): loaded when a Shell tab first opens. */
async function loadTerminal(): Promise<{ term: Terminal; fit: () => void }> {
  const [{ Terminal }, { FitAddon }] = await Promise.all([import("@xterm/xterm"), import("@xterm/addon-fit")]);
  const term = new Terminal({ cursorBlink: true, fontFamily: "monospace", fontSize: 13, scrollback: 2_000, theme: { background: "#000000", foreground: "#e6e6e6", cursor: "#e6e6e6" } });
  const fit = new FitAddon();
  term.loadAddon(fit);
  return { term, fit: () => fit.fit() };
}

const why = (err: unknown) => (err instanceof ConnectError ? err.rawMessage : (err as Error).message);

/**
 * The Shell tab: the phone's interactive shell (the same pty shell `farm
 * shell` opens, journaled as one action) in xterm.js. Output streams from
 * ShellService.WatchShell; keys and resizes go by SendShellInput calls, one
 * at a time, what was typed meanwhile sent together. Holder only: it opens
 * when the page holds the lease. Closing the tab ends the shell.
 */
export const shellTab: WorkspaceTab = {
  id: "shell",
  title: "Shell",
  open(initial: WorkspaceTarget): WorkspaceTabView {
    const screen = h("div", { class: "shell-screen", "data-cell": "shell-screen" });
    const status = h("p", { class: "count", role: "status", "data-cell": "shell-status" });
    const again = h("button", { type: "button", hidden: true, onclick: () => start(target) }, "New shell");
    const el = h("section", { class: "workspace-tab shell-tab" }, h("div", { class: "shell-tools" }, again), status, screen);
    let term!: Terminal;
    let fit!: () => void;
    let opened = false;
    let started = false;
    let target = initial;
    let running: AbortController | undefined;
    let shellId = "";
    let leaseToken = "";
    let pending: Uint8Array[] = [];
    let pendingBytes = 0;
    let sending = false;
    const encoder = new TextEncoder();

    const say = (text: string) => (status.textContent = text);
    const headers = () => (leaseToken ? { headers: { "x-farm-lease": leaseToken } } : {});

    /** Sends what was typed, one call at a time. */
    const flush = async () => {
      if (sending || !shellId) return;
      sending = true;
      try {
        while (pending.length > 0 && shellId) {
          const all = new Uint8Array(pendingBytes);
          let at = 0;
          for (const p of pending) {
            all.set(p, at);
            at += p.length;
          }
          pending = [];
          pendingBytes = 0;
          for (let i = 0; i < all.length; i += INPUT_CHUNK_BYTES) {
            await api.shell.sendShellInput({ shellId, kind: { case: "stdin", value: all.subarray(i, i + INPUT_CHUNK_BYTES) } }, headers());
          }
        }
      } catch (err) {
        if (shellId) say(`Input not sent: ${why(err)}`);
      } finally {
        sending = false;
      }
    };
    const wire = () => {
      term.onData((data) => {
        if (!shellId) return;
        const bytes = encoder.encode(data);
        if (pendingBytes + bytes.length > INPUT_PENDING_MAX_BYTES) return say("Input dropped: the shell is not keeping up.");
        pending.push(bytes);
        pendingBytes += bytes.length;
        void flush();
      });
      term.onResize(({ rows, cols }) => {
        if (shellId) void api.shell.sendShellInput({ shellId, kind: { case: "resize", value: { rows, cols } } }, headers()).catch(() => undefined);
      });
    };

    const stop = () => {
      running?.abort();
      running = undefined;
      shellId = "";
      pending = [];
      pendingBytes = 0;
    };
    const start = async (t: WorkspaceTarget) => {
      stop();
      again.hidden = true;
      const abort = new AbortController();
      running = abort;
      leaseToken = t.leaseToken;
      started = true;
      ensureOpen();
      term.reset();
      say(`Opening a shell on ${t.serial}…`);
      try {
        const call = api.shell.watchShell(
          { start: { target: { serial: t.serial }, size: { rows: term.rows, cols: term.cols }, term: "xterm-256color" } },
          { signal: abort.signal, ...headers() },
        );
        for await (const res of call) {
          const k = res.kind;
          if (k.case === "opened") {
            shellId = k.value.shellId;
            el.dataset["actionId"] = k.value.actionId;
            say(`Shell on ${t.serial} (action ${k.value.actionId}).`);
            term.focus();
          } else if (k.case === "output") term.write(k.value);
          else if (k.case === "exitCode") say(`The shell exited with code ${k.value}.`);
        }
        if (running === abort) say(status.textContent?.startsWith("The shell exited") ? status.textContent : "The shell ended.");
      } catch (err) {
        if (abort.signal.aborted) return;
        say(why(err));
      } finally {
        if (running === abort) {
          running = undefined;
          shellId = "";
          again.hidden = !target.canAct;
        }
      }
    };
    /** xterm measures its cells on the page: it opens once the tab is there. */
    const ensureOpen = () => {
      if (!opened && screen.isConnected) {
        term.open(screen);
        opened = true;
      }
      if (opened) fit();
    };
    const onWindowResize = () => opened && fit();
    window.addEventListener("resize", onWindowResize);

    const update = (t: WorkspaceTarget) => {
      if (!term) {
        target = t;
        return;
      }
      const changed = t.serial !== target.serial || t.leaseToken !== target.leaseToken || t.canAct !== target.canAct;
      target = t;
      if (!t.canAct || !t.serial) {
        stop();
        again.hidden = true;
        return say(!t.serial ? "No serial of this phone is online." : "The shell is for the phone's lease holder: lease it here first.");
      }
      // A shell runs until it exits or the tab closes; a new lease (or serial) starts a new one.
      if (changed || !started) void start(t);
      else ensureOpen();
    };
    let closed = false;
    // Started once xterm is loaded and the tab is on the page.
    say("Loading the terminal…");
    void loadTerminal().then((t) => {
      if (closed) return t.term.dispose();
      ({ term, fit } = t);
      wire();
      requestAnimationFrame(() => update(target));
    }, (err: unknown) => say(`The terminal could not load: ${why(err)}`));
    return {
      el,
      update,
      close() {
        closed = true;
        stop();
        window.removeEventListener("resize", onWindowResize);
        term?.dispose();
      },
    };
  },
};
