import { ConnectError } from "@connectrpc/connect";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { api } from "../../api.js";
import { h, replaceChildren } from "../../dom.js";
import type { LiveState } from "../../live-state.js";
import { forgetLeaseToken, keepLeaseToken, leaseTokenOf } from "./lease-token.js";
import { clock, countdown, renewalTtl } from "./lease-time.js";

/** What "Lease it" asks for; renewals add to it. */
const LEASE_TTL_MS = 30 * 60_000;

/**
 * The workspace's lease bar: take the phone, renew it (+15 or +30 minutes),
 * release it, with the time left counting down; an admin gets the same.
 * Someone who cannot lease it (a viewer, or anyone while another holds it)
 * sees who holds it and when it frees. `changed` is told when this tab
 * takes or gives up the lease token.
 */
export function leaseControls(state: LiveState, physicalId: string, changed: () => void): { el: HTMLElement; render: () => void } {
  const text = h("span", { "data-cell": "lease" });
  const buttons = h("span", { class: "lease-buttons" });
  const status = h("span", { role: "status", "data-cell": "lease-status" });
  const el = h("div", { class: "lease-bar", "aria-label": "Lease" }, text, buttons, status);
  let busy = false;
  const say = (message: string, bad = false) => {
    status.textContent = message;
    status.className = bad ? "bad" : "";
  };
  const act = async (what: string, fn: () => Promise<void>) => {
    if (busy) return;
    busy = true;
    say("");
    try {
      await fn();
    } catch (err) {
      say(`Could not ${what}: ${ConnectError.from(err).rawMessage}`, true);
    } finally {
      busy = false;
      render();
    }
  };
  const serialNow = () => state.phone(physicalId).find((d) => d.state === "device")?.serial ?? "";

  const take = h("button", {
    type: "button",
    "data-action": "take",
    onclick: () =>
      void act("lease it", async () => {
        const serial = serialNow();
        if (!serial) throw new Error("no serial of this phone is online");
        const r = await api.leases.acquireLease({ selector: { serial }, ttlMs: LEASE_TTL_MS });
        keepLeaseToken(physicalId, r.token);
        // Shown at once: the watch stream's lease event may come a moment later.
        if (r.lease && !state.leases.has(physicalId)) state.leases.set(physicalId, r.lease);
        changed();
      }),
  }, "Lease it for 30 minutes");
  const renew = (minutes: number) =>
    h("button", {
      type: "button",
      "data-action": `renew-${minutes}`,
      title: `Extend the lease by ${minutes} minutes`,
      onclick: () =>
        void act("renew it", async () => {
          const lease = state.leases.get(physicalId);
          const ends = lease?.expireTime ? timestampDate(lease.expireTime).getTime() : Date.now();
          const r = await api.leases.renewLease({ token: leaseTokenOf(physicalId), ttlMs: renewalTtl(ends, Date.now(), minutes * 60_000) });
          if (r.lease) state.leases.set(physicalId, r.lease);
          say(`Renewed: until ${r.lease?.expireTime ? clock(timestampDate(r.lease.expireTime).getTime()) : "?"}.`);
        }),
    }, `+${minutes} min`);
  const release = h("button", {
    type: "button",
    "data-action": "release",
    onclick: () =>
      void act("release it", async () => {
        await api.leases.releaseLease({ token: leaseTokenOf(physicalId) });
        forgetLeaseToken(physicalId);
        state.leases.delete(physicalId);
        say("Released.");
        changed();
      }),
  }, "Release");
  const tokenInput = h("input", { type: "password", placeholder: "Lease token (FARM_LEASE)", "aria-label": "Lease token", autocomplete: "off" }) as HTMLInputElement;
  const useToken = h("button", {
    type: "button",
    onclick: () => {
      if (!tokenInput.value.trim()) return;
      keepLeaseToken(physicalId, tokenInput.value.trim());
      tokenInput.value = "";
      changed();
    },
  }, "Use this lease");
  const renews = [renew(15), renew(30)];

  const render = () => {
    const me = state.me;
    const lease = state.leases.get(physicalId);
    const token = leaseTokenOf(physicalId);
    if (!lease) {
      // Held out of the pool between users (a cleanup policy): why, rather than a Lease that leases skip.
      const held = state.phone(physicalId).find((d) => d.state === "cleaning" || d.state === "needs-attention");
      if (held) {
        text.textContent = held.state === "cleaning"
          ? "Being cleaned after its last lease: leasable again once that is done."
          : `Needs attention: ${held.attentionReason || "its cleanup failed"}. Leases skip it until an admin clears it (farm device clear-attention).`;
        replaceChildren(buttons);
        return;
      }
      const serial = serialNow();
      text.textContent = "Not leased.";
      if (!me || me.role === "viewer") replaceChildren(buttons, h("span", { class: "count" }, "Viewers watch only: an operator or an admin can lease it."));
      else replaceChildren(buttons, serial ? take : h("span", { class: "count" }, "No serial of this phone is online to lease."));
      return;
    }
    const ends = lease.expireTime ? timestampDate(lease.expireTime).getTime() : 0;
    const left = countdown(ends - Date.now());
    if (token) {
      replaceChildren(text, "Leased by you · ", h("strong", { "data-cell": "lease-remaining" }, left), ` left (until ${clock(ends)})`);
      replaceChildren(buttons, ...renews, release);
      return;
    }
    if (lease.holder === me?.name) {
      text.textContent = `Leased by you elsewhere (the CLI?), until ${clock(ends)}: paste its token to use it here.`;
      replaceChildren(buttons, tokenInput, useToken);
      return;
    }
    replaceChildren(text, `Leased by ${lease.holder} · frees at ${clock(ends)} (in `, h("span", { "data-cell": "lease-remaining" }, left), ") unless renewed");
    // An admin who has the holder's token (from the CLI) may act with it.
    replaceChildren(buttons, me?.admin ? [tokenInput, useToken] : []);
  };
  return { el, render };
}
