import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { fileUrl } from "../api.js";
import { h, replaceChildren, table } from "../dom.js";
import { bytes } from "../format.js";
import { hierarchyTree, jsonHierarchyTree } from "../hierarchy-tree.js";
import type { View } from "../view.js";

/** One stored bundle: media, artifacts with hashes and downloads, the hierarchy as a tree, errors, the manifest. */
export const bundleView: View = (root, _state, id) => {
  const ac = new AbortController();
  root.append(h("h1", {}, `Evidence ${id.slice(0, 8)}`), h("p", { role: "status" }, "Loading…"));
  void (async () => {
    const r = await fetch(fileUrl(id, "manifest.json"), { signal: ac.signal, credentials: "same-origin" });
    if (!r.ok) {
      replaceChildren(root, h("h1", {}, "Evidence"), h("p", { class: "error" }, `Bundle ${id} could not be read (${r.status}).`));
      return;
    }
    const text = await r.text();
    const m = JSON.parse(text) as EvidenceManifest;
    const has = (path: string) => m.artifacts.some((a) => a.path === path);
    const artifacts = h("tbody");
    artifacts.append(
      ...m.artifacts.map((a) =>
        h(
          "tr",
          {},
          h("th", { scope: "row" }, a.kind),
          h("td", {}, a.path ?? "(none)"),
          h("td", { class: `status status-${a.status}` }, a.status),
          h("td", {}, bytes(a.bytes)),
          h("td", { class: "hash" }, a.sha256 ? h("code", { title: a.sha256 }, `${a.sha256.slice(0, 16)}…`) : ""),
          h("td", {}, a.path ? h("a", { href: fileUrl(id, a.path, true), download: `${id}-${a.path}` }, "Download") : ""),
        )
      ),
    );
    const v = m.video;
    const sections: HTMLElement[] = [
      h("h1", {}, `${m.kind === "video" ? "Recording" : "Evidence"} ${id.slice(0, 8)}`),
      h(
        "dl",
        { class: "facts" },
        h("dt", {}, "Status"),
        h("dd", { class: `status status-${m.status}` }, m.status),
        h("dt", {}, "Device"),
        h("dd", {}, `${m.device.serial} (${m.device.manufacturer ?? ""} ${m.device.model ?? ""}, API ${m.device.apiLevel ?? "?"})`),
        h("dt", {}, "Started"),
        h("dd", {}, m.startedAt),
        h("dt", {}, "Finished"),
        h("dd", {}, m.finishedAt ?? "still recording"),
        h("dt", {}, "Label"),
        h("dd", {}, m.label ?? "(none)"),
        ...(v
          ? [
            h("dt", {}, "Video"),
            h("dd", {}, `${v.actualSize ? `${v.actualSize.width}x${v.actualSize.height}` : "?"} ${v.codec ?? ""}, media ${v.mediaDurationMs ?? "?"} ms, host ${v.hostDurationMs ?? "?"} ms, stop: ${v.stopReason ?? "-"}`),
          ]
          : []),
      ),
    ];
    if (has("video.mp4")) sections.push(h("h2", {}, "Video"), h("video", { controls: true, preload: "metadata", src: fileUrl(id, "video.mp4"), class: "media" }));
    if (has("screenshot.png")) sections.push(h("h2", {}, "Screenshot"), h("img", { src: fileUrl(id, "screenshot.png"), alt: `Screenshot of ${m.device.serial}`, class: "media screenshot" }));
    if (m.errors.length) sections.push(h("h2", {}, "Errors"), h("ul", { class: "errors" }, m.errors.map((e) => h("li", {}, h("strong", {}, e.code), ` at ${e.stage}${e.component ? ` (${e.component})` : ""}: ${e.message}`))));
    sections.push(table("Artifacts", ["Kind", "File", "Status", "Size", "SHA-256", ""], artifacts));
    const treeSlot = h("div");
    const treeFile = has("hierarchy.xml") ? "hierarchy.xml" : has("hierarchy.json") ? "hierarchy.json" : null;
    if (treeFile) sections.push(h("h2", {}, treeFile === "hierarchy.json" ? `UI hierarchy (from ${m.device.appPackage ?? "the app"}'s SDK)` : "UI hierarchy"), treeSlot);
    sections.push(h("details", { class: "manifest" }, h("summary", {}, "manifest.json"), h("pre", {}, JSON.stringify(m, null, 2))));
    replaceChildren(root, ...sections);
    if (treeFile) {
      const x = await fetch(fileUrl(id, treeFile), { signal: ac.signal, credentials: "same-origin" });
      const text = x.ok ? await x.text() : undefined;
      replaceChildren(treeSlot, text === undefined ? h("p", { class: "error" }, "The hierarchy could not be read.") : treeFile === "hierarchy.xml" ? hierarchyTree(text) : jsonHierarchyTree(text));
    }
  })().catch((err: Error) => {
    if (!ac.signal.aborted) replaceChildren(root, h("p", { class: "error" }, err.message));
  });
  return () => ac.abort();
};
