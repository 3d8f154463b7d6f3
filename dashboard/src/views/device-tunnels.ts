import { ConnectError } from "@connectrpc/connect";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { Tunnel } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { api } from "../api.js";
import { h, replaceChildren, table } from "../dom.js";
import { ago, bytes, when } from "../format.js";
import type { LiveState } from "../live-state.js";

interface Row {
  tr: HTMLTableRowElement;
  since: HTMLElement;
  toDevice: HTMLElement;
  fromDevice: HTMLElement;
  streams: HTMLElement;
  close: HTMLButtonElement | undefined;
  tunnel: Tunnel;
}

/**
 * The "Remote adb" section of a device page: who has a tunnel to the phone,
 * since when, and the bytes each way, kept live; an admin may close any.
 * Rows are updated in place, so a button is not replaced under the pointer.
 */
export function deviceTunnels(state: LiveState, physicalId: string): { el: HTMLElement; render: () => void } {
  const admin = state.me?.admin === true;
  const headers = ["User", "Since", "To device", "From device", "Streams", ...(admin ? ["Admin"] : [])];
  const body = h("tbody");
  const status = h("p", { class: "count", role: "status" });
  const el = h("div", { id: "device-tunnels" }, table("Remote adb (farm adb connect)", headers, body), status);
  const rows = new Map<string, Row>();
  /** Tunnels whose close was asked for, with their owners: their button stays disabled until they are gone. */
  const closing = new Map<string, string>();

  const closeTunnel = async (row: Row) => {
    const t = row.tunnel;
    if (!confirm(`Close ${t.owner}'s remote adb tunnel to ${t.serial}? Their adb loses the phone at once.`)) return;
    closing.set(t.tunnelId, t.owner);
    update(row);
    status.textContent = "";
    try {
      await api.tunnels.closeTunnel({ tunnelId: t.tunnelId });
      // The row leaves when the coordinator says the tunnel closed (which may have come first).
      if (closing.has(t.tunnelId)) status.textContent = `Closing ${t.owner}'s tunnel…`;
    } catch (err) {
      closing.delete(t.tunnelId);
      update(row);
      status.textContent = `Could not close ${t.owner}'s tunnel: ${ConnectError.from(err).rawMessage}`;
    }
  };

  const update = (row: Row) => {
    const t = row.tunnel;
    const opened = timestampFromMs(Number(t.openedAtMs));
    row.since.textContent = ago(opened);
    row.since.title = when(opened);
    row.toDevice.textContent = bytes(t.bytesToDevice);
    row.fromDevice.textContent = bytes(t.bytesFromDevice);
    row.streams.textContent = String(t.openStreams);
    if (row.close) {
      row.close.disabled = closing.has(t.tunnelId);
      row.close.textContent = closing.has(t.tunnelId) ? "Closing…" : "Close";
    }
  };

  const rowOf = (t: Tunnel): Row => {
    const old = rows.get(t.tunnelId);
    if (old) {
      old.tunnel = t;
      return old;
    }
    const since = h("td", { "data-cell": "since" });
    const toDevice = h("td", { "data-cell": "to-device" });
    const fromDevice = h("td", { "data-cell": "from-device" });
    const streams = h("td", { "data-cell": "streams" });
    const close = admin ? h("button", { type: "button", "aria-label": `Close ${t.owner}'s tunnel` }, "Close") : undefined;
    const tr = h("tr", { "data-tunnel": t.tunnelId }, h("th", { scope: "row", "data-cell": "owner", title: `${t.serial} on ${t.agentName}, lease ${t.leaseId}` }, t.owner), since, toDevice, fromDevice, streams, close && h("td", {}, close));
    const row: Row = { tr, since, toDevice, fromDevice, streams, close, tunnel: t };
    close?.addEventListener("click", () => void closeTunnel(row));
    rows.set(t.tunnelId, row);
    return row;
  };
  const render = () => {
    const list = state.tunnelsOn(physicalId);
    const ids = new Set(list.map((t) => t.tunnelId));
    for (const id of rows.keys()) if (!ids.has(id)) rows.delete(id);
    for (const [id, owner] of closing) {
      if (ids.has(id)) continue;
      closing.delete(id);
      status.textContent = `Closed ${owner}'s tunnel.`;
    }
    if (list.length === 0) {
      replaceChildren(body, h("tr", {}, h("td", { colspan: headers.length }, "No remote adb tunnels to this device.")));
      return;
    }
    const ordered = list.map((t) => {
      const row = rowOf(t);
      update(row);
      return row.tr;
    });
    // Moved only when the set or order changed.
    if (ordered.length !== body.children.length || ordered.some((tr, i) => body.children[i] !== tr)) body.replaceChildren(...ordered);
  };
  return { el, render };
}
