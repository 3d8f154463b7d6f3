import { ConnectError } from "@connectrpc/connect";
import { DEVICE_FILE_DIRS, DEVICE_FILE_MAX_BYTES } from "@farm/shared/device-files";
import { api } from "../../api.js";
import { h } from "../../dom.js";
import type { WorkspaceTab, WorkspaceTarget, WorkspaceTabView } from "./workspace-tab.js";

const DIR = DEVICE_FILE_DIRS[0];
const why = (err: unknown) => (err instanceof ConnectError ? err.rawMessage : (err as Error).message);
const mib = (n: number) => `${(n / 1024 / 1024).toFixed(n < 1024 * 1024 ? 2 : 1)} MiB`;

/** Uploads a file to the coordinator's blob store (POST /dashboard/api/blobs), reporting progress; returns the blob id. */
function upload(file: File, onProgress: (sent: number) => void): Promise<string> {
  return new Promise((resolve, reject) => {
    // XMLHttpRequest, not fetch: only it reports upload progress.
    const xhr = new XMLHttpRequest();
    xhr.open("POST", `/dashboard/api/blobs?name=${encodeURIComponent(file.name)}`);
    xhr.withCredentials = true;
    xhr.upload.onprogress = (e) => onProgress(e.loaded);
    xhr.onload = () => {
      const body = JSON.parse(xhr.responseText || "{}") as { blobId?: string; code?: string; message?: string };
      if (xhr.status === 200 && body.blobId) resolve(body.blobId);
      else reject(new Error(`${body.code ?? xhr.status}: ${body.message ?? "upload failed"}`));
    };
    xhr.onerror = () => reject(new Error("the upload failed (connection lost)"));
    xhr.send(file);
  });
}

/** Reads a blob back (BlobService.DownloadBlob) and checks its size and sha256 before handing it over. */
async function download(blobId: string): Promise<{ bytes: Blob; name: string }> {
  const chunks: Uint8Array<ArrayBuffer>[] = [];
  let header: { size: bigint; sha256: string; name: string } | undefined;
  for await (const res of api.blob.downloadBlob({ blobId })) {
    const k = res.part?.kind;
    if (k?.case === "header") header = k.value;
    else if (k?.case === "chunk") chunks.push(new Uint8Array(k.value));
  }
  if (!header) throw new Error("the download had no header");
  const bytes = new Blob(chunks);
  const sha = [...new Uint8Array(await crypto.subtle.digest("SHA-256", await bytes.arrayBuffer()))].map((b) => b.toString(16).padStart(2, "0")).join("");
  if (BigInt(bytes.size) !== header.size || sha !== header.sha256) throw new Error("the downloaded file does not match its size and sha256");
  return { bytes, name: header.name };
}

/**
 * The Files tab: push a file to the phone's /sdcard/Download/ (upload with
 * progress, then the routed, journaled PushFile) and pull one back (PullFile
 * into the blob store, then a download checked by sha256). Paths are checked
 * by the coordinator and the agent before the phone is touched. Holder only.
 */
export const filesTab: WorkspaceTab = {
  id: "files",
  title: "Files",
  open(initial: WorkspaceTarget): WorkspaceTabView {
    let target = initial;
    const status = h("p", { class: "count", role: "status", "data-cell": "files-status" });
    const say = (text: string, bad = false) => {
      status.textContent = text;
      status.className = bad ? "count bad" : "count";
    };
    const pick = h("input", { type: "file", "aria-label": "File to push" });
    const name = h("input", { type: "text", "aria-label": "Name on the phone", placeholder: "name on the phone" });
    const push = h("button", { type: "button", onclick: () => void pushFile(pick.files?.[0]) }, `Push to ${DIR}`);
    const drop = h("div", { class: "drop-zone", "data-cell": "files-drop" }, `Drop a file here, or choose one (at most ${mib(DEVICE_FILE_MAX_BYTES)}).`);
    const path = h("input", { type: "text", "aria-label": "Path on the phone", value: DIR, size: 48 });
    const pull = h("button", { type: "button", onclick: () => void pullFile() }, "Pull");
    const el = h(
      "section",
      { class: "workspace-tab files-tab" },
      h("h3", {}, "Push a file"),
      drop,
      h("div", { class: "file-tools" }, pick, name, push),
      h("h3", {}, "Pull a file"),
      h("div", { class: "file-tools" }, path, pull),
      status,
    );
    pick.addEventListener("change", () => (name.value = pick.files?.[0]?.name ?? ""));
    drop.addEventListener("dragover", (e) => e.preventDefault());
    drop.addEventListener("drop", (e) => {
      e.preventDefault();
      const file = e.dataTransfer?.files[0];
      if (file) {
        name.value = file.name;
        void pushFile(file);
      }
    });
    const headers = () => ({ headers: { "x-farm-lease": target.leaseToken } });
    let busy = false;
    const enable = () => {
      for (const b of [push, pull, pick]) b.disabled = busy || !target.canAct || !target.serial;
    };

    const pushFile = async (file: File | undefined) => {
      if (!file) return say("Choose a file first.", true);
      // The limit is applied before a byte of the file is read.
      if (file.size > DEVICE_FILE_MAX_BYTES) return say(`${file.name} is ${mib(file.size)}; files pushed are at most ${mib(DEVICE_FILE_MAX_BYTES)}.`, true);
      const dest = `${DIR}${name.value.trim() || file.name}`;
      busy = true;
      enable();
      try {
        const blobId = await upload(file, (sent) => say(`Uploading ${file.name}: ${mib(sent)} of ${mib(file.size)}…`));
        say(`Pushing to ${dest}…`);
        const r = await api.device.pushFile({ target: { serial: target.serial }, blobId, path: dest }, headers());
        say(`Pushed ${r.size} bytes to ${dest} (sha256 ${r.sha256.slice(0, 12)}…, action ${r.actionId}).`);
        path.value = dest;
      } catch (err) {
        say(`Push failed: ${why(err)}`, true);
      } finally {
        busy = false;
        enable();
      }
    };

    const pullFile = async () => {
      const from = path.value.trim();
      busy = true;
      enable();
      try {
        say(`Pulling ${from}…`);
        const r = await api.device.pullFile({ target: { serial: target.serial }, path: from }, headers());
        const { bytes, name: fileName } = await download(r.blobId);
        const a = h("a", { href: URL.createObjectURL(bytes), download: fileName });
        a.click();
        setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
        say(`Pulled ${from}: ${r.size} bytes (sha256 ${r.sha256.slice(0, 12)}…).`);
      } catch (err) {
        say(`Pull failed: ${why(err)}`, true);
      } finally {
        busy = false;
        enable();
      }
    };

    const update = (t: WorkspaceTarget) => {
      target = t;
      enable();
      if (!t.serial) say("No serial of this phone is online.");
      else if (!t.canAct) say("Files are for the phone's lease holder: lease it here first.");
      else if (!busy && status.textContent?.endsWith("first.")) say("");
    };
    update(initial);
    return { el, update, close: () => undefined };
  },
};
