import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { OcrObservation, SessionStep, StepImage, StepOcr } from "@farm/shared/gen/farm/v1/session_service_pb";
import { fileUrl, sessionFileUrl, sessionImageUrl } from "./api.js";
import { append, h, replaceChildren } from "./dom.js";
import { bytes, duration, when } from "./format.js";
import { uiElementTree, type UiElementJson } from "./hierarchy-tree.js";

/** One step of a session's timeline on the page; `update` takes a newer copy of the same step (its OCR arrived). */
export interface StepCard {
  el: HTMLElement;
  step: SessionStep;
  update(step: SessionStep): void;
}

const OCR_DONE = new Set(["done", "failed", "skipped"]);

const json = (v: JsonValue | undefined) => JSON.stringify(v ?? {}, null, 2);

/** Where a step's screenshot is served: the session's image store, or (a version 1 record) its still bundle's file. */
function imageSrc(sessionId: string, img: StepImage): string | undefined {
  if (img.sha256) return sessionImageUrl(sessionId, img.sha256);
  if (img.evidenceId && img.path) return fileUrl(img.evidenceId, img.path);
  return undefined;
}

/**
 * One screenshot of a step with a frame that the OCR boxes are drawn in:
 * the frame is exactly the displayed image, so a box placed in percent of
 * the image's pixel size lands on the same pixels at any displayed size.
 */
function shot(sessionId: string, step: SessionStep, which: "before" | "after", img: StepImage | undefined, caption: string): { el: HTMLElement; frame: HTMLElement | undefined; img: HTMLImageElement | undefined } {
  const fig = h("figure", { class: `shot shot-${which}`, "data-shot": which }, h("figcaption", {}, caption));
  const src = img && imageSrc(sessionId, img);
  if (!img || !src) {
    fig.append(
      img?.errorCode || img?.errorMessage
        ? h("p", { class: "error shot-error", role: "note" }, h("strong", {}, img.errorCode || "CAPTURE_FAILED"), img.errorMessage ? `: ${img.errorMessage}` : "")
        : h("p", { class: "shot-missing" }, "No screenshot."),
    );
    return { el: fig, frame: undefined, img: undefined };
  }
  const image = h("img", {
    src,
    alt: `Screen ${which} step ${step.sequence}`,
    loading: "lazy",
    "data-sha256": img.sha256,
    ...(img.width && img.height ? { width: img.width, height: img.height } : {}),
  });
  image.addEventListener("error", () => image.replaceWith(h("p", { class: "error shot-error" }, "The screenshot could not be loaded.")));
  const frame = h("div", { class: "shot-frame" }, image);
  fig.append(frame);
  if (img.width && img.height) fig.append(h("p", { class: "count" }, `${img.width}×${img.height}${img.captureTime ? `, ${when(img.captureTime)}` : ""}`));
  // A version 1 record's screenshot is a still bundle's file: the bundle is one click away.
  if (img.evidenceId) fig.append(h("p", { class: "count" }, h("a", { href: `#/evidence/${encodeURIComponent(img.evidenceId)}` }, `Evidence ${img.evidenceId.slice(0, 8)}`)));
  return { el: fig, frame, img: image };
}

function rectText(r: { left: number; top: number; right: number; bottom: number } | undefined): string {
  return r ? `[${r.left},${r.top}][${r.right},${r.bottom}]` : "";
}

/** The result of the action: outcome, error, what is known of its delivery, output. */
function result(step: SessionStep): HTMLElement {
  const r = step.result;
  const facts: (HTMLElement | string)[] = [];
  const fact = (term: string, ...value: (HTMLElement | string)[]) => facts.push(h("dt", {}, term), h("dd", {}, ...value));
  if (!r) {
    fact("Result", "none recorded");
    return h("dl", { class: "facts step-result" }, facts);
  }
  fact("Result", h("span", { class: r.ok ? "ok" : "bad", "data-cell": "outcome" }, r.ok ? "ok" : "failed"));
  if (!r.ok || r.errorCode) {
    fact("Error", h("span", { class: "error step-error" }, h("strong", {}, r.errorCode || "ERROR"), r.errorMessage ? `: ${r.errorMessage}` : "", r.errorField ? ` (field ${r.errorField})` : ""));
  }
  if (r.dispatched !== undefined) fact("Dispatched", r.dispatched ? "yes, it reached the phone" : "no, it did not reach the phone");
  if (r.ambiguous) fact("Ambiguous", "yes: whether it took effect is not known");
  if (r.actionId) fact("Action id", h("code", {}, r.actionId));
  if (r.exitCode !== undefined) fact("Exit code", h("span", { class: r.exitCode === 0 ? "ok" : "bad" }, String(r.exitCode)));
  if (r.outputExcerpt) fact("Output", h("pre", { class: "output" }, r.outputExcerpt));
  return h("dl", { class: "facts step-result" }, facts);
}

const isUiTreeStep = (step: SessionStep) => step.action === "ui-tree" || step.method.endsWith("/GetUiTree");

/** The UI tree a ui-tree step read: only for such a step, and only when it read nodes. */
function uiTree(step: SessionStep): HTMLElement | null {
  const response = step.result?.response;
  const roots = response?.["roots"];
  if (!isUiTreeStep(step) || !Array.isArray(roots) || roots.length === 0) return null;
  const count = typeof response?.["nodeCount"] === "number" ? response["nodeCount"] : undefined;
  const source = typeof response?.["source"] === "string" ? response["source"] : "";
  const raw = h("pre", { class: "raw-json" });
  const rawBox = h("details", { class: "raw" }, h("summary", {}, "Raw JSON"), raw);
  // Written when first opened: a big tree's JSON is not laid out until someone asks.
  rawBox.addEventListener("toggle", () => {
    if (rawBox.open && !raw.textContent) raw.textContent = json(response);
  });
  return h(
    "section",
    { class: "ui-tree-section", "aria-label": `UI tree of step ${step.sequence}` },
    h("h3", {}, "UI tree", h("span", { class: "count" }, ` ${count !== undefined ? `${count} nodes` : ""}${source ? `, from ${source}` : ""}`)),
    uiElementTree(roots as unknown as UiElementJson[]),
    rawBox,
  );
}

/** Arguments, and the response of a step that is not a UI-tree read, as collapsible JSON. */
/** The step's further evidence (device log, UI trees, video, a diagnosis): each file with where it came from, or why it is missing. */
function artifacts(step: SessionStep): HTMLElement | null {
  if (step.artifacts.length === 0) return null;
  return h(
    "div",
    { class: "artifacts" },
    h("h3", {}, "Evidence"),
    h(
      "ul",
      {},
      step.artifacts.map((a) =>
        h(
          "li",
          { "data-artifact": a.name, "data-kind": a.kind, ...(a.speculative ? { "data-speculative": "true" } : {}) },
          a.sha256 ? h("a", { href: sessionFileUrl(step.sessionId, a.sha256), target: "_blank", rel: "noopener" }, a.name) : h("span", {}, a.name),
          ` ${a.kind}${a.when ? `.${a.when}` : ""} from ${a.provider}${a.sha256 ? `, ${bytes(a.size)}` : ""}${a.reason ? ` (${a.reason}${a.speculative ? ", speculative" : ""})` : ""}`,
          a.skippedReason ? h("span", { class: "skipped" }, ` skipped: ${a.skippedReason}`) : null,
          a.warning ? h("span", { class: "warning" }, ` ${a.warning}`) : null,
        )
      ),
    ),
  );
}

function jsonBox(title: string, cls: string, value: JsonObject | undefined): HTMLElement | null {
  if (!value || Object.keys(value).length === 0) return null;
  return h("details", { class: `json ${cls}` }, h("summary", {}, title), h("pre", {}, json(value)));
}

/**
 * The OCR of the before screenshot: a list of words (hovering or focusing
 * one outlines its box on the image) once done with words; a one-line note
 * while pending, when nothing was found, or when it failed; nothing when
 * the session has OCR off.
 */
function ocrSection(step: SessionStep, ocr: StepOcr | undefined, before: { frame: HTMLElement | undefined; img: HTMLImageElement | undefined }): HTMLElement | null {
  if (!ocr) return null;
  if (ocr.status === "pending") return h("p", { class: "ocr-note", "data-ocr": "pending", role: "status" }, "OCR pending…");
  if (ocr.status === "failed") return h("p", { class: "ocr-note error", "data-ocr": "failed" }, `OCR failed${ocr.error ? `: ${ocr.error}` : ""}.`);
  if (ocr.status === "skipped") return h("p", { class: "ocr-note", "data-ocr": "skipped" }, `OCR skipped${ocr.error ? `: ${ocr.error}` : ""}.`);
  if (ocr.observations.length === 0) return h("p", { class: "ocr-note", "data-ocr": "empty" }, "OCR found no text.");
  const box = h("div", { class: "ocr-box", hidden: true, "aria-hidden": "true" });
  before.frame?.append(box);
  const show = (o: OcrObservation) => {
    const img = before.img;
    const b = o.bounds;
    // The box is in the screenshot's pixels; the frame is the image as displayed.
    const w = img?.naturalWidth || step.before?.width || 0;
    const ht = img?.naturalHeight || step.before?.height || 0;
    if (!b || !w || !ht) return;
    Object.assign(box.style, {
      left: `${(b.left / w) * 100}%`,
      top: `${(b.top / ht) * 100}%`,
      width: `${((b.right - b.left) / w) * 100}%`,
      height: `${((b.bottom - b.top) / ht) * 100}%`,
    });
    box.title = o.text;
    box.hidden = false;
  };
  const hide = () => (box.hidden = true);
  const rows = ocr.observations.map((o, i) =>
    h(
      "tr",
      { "data-ocr-index": i, tabindex: 0, onmouseenter: () => show(o), onmouseleave: hide, onfocus: () => show(o), onblur: hide },
      h("td", { "data-cell": "text" }, o.text),
      h("td", { "data-cell": "confidence" }, `${Math.round(o.confidence * 100)}%`),
      h("td", { "data-cell": "bounds" }, rectText(o.bounds)),
    )
  );
  return h(
    "details",
    { class: "ocr", open: true, "data-ocr": "done" },
    h("summary", {}, `Text on the before screenshot (OCR): ${ocr.observations.length} word${ocr.observations.length === 1 ? "" : "s"}`, ocr.durationMs ? h("span", { class: "count" }, ` in ${duration(ocr.durationMs)}`) : ""),
    h("div", { class: "table-wrap" }, h("table", { class: "ocr-list" }, h("thead", {}, h("tr", {}, ["Text", "Confidence", "Bounds"].map((t) => h("th", { scope: "col" }, t)))), h("tbody", {}, rows))),
  );
}

/** A step's card: header line, screenshots side by side, result, arguments, attempts, OCR, UI tree. */
export function stepCard(step: SessionStep): StepCard {
  const legacy = step.recordVersion === 1;
  const failed = step.result ? !step.result.ok : false;
  const el = h("li", { class: `step${failed ? " step-failed" : ""}`, "data-seq": step.sequence, "data-action": step.action, "data-record-version": step.recordVersion, id: `step-${step.sequence}` });
  const before = legacy ? { el: null, frame: undefined, img: undefined } : shot(step.sessionId, step, "before", step.before, "Before");
  const after = shot(step.sessionId, step, "after", step.after, legacy ? "After (the record's only screenshot)" : "After");
  const ocrSlot = h("div", { class: "ocr-slot" });
  const attempts = step.attempts.length
    ? h(
      "details",
      { class: "attempts" },
      h("summary", {}, `${step.attempts.length} earlier attempt${step.attempts.length === 1 ? "" : "s"} the farm made itself`),
      h("ol", {}, step.attempts.map((a) => h("li", {}, when(a.startTime), ` ${duration(a.durationMs)}: `, h("strong", {}, a.errorCode || "error"), a.errorMessage ? ` ${a.errorMessage}` : ""))),
    )
    : null;
  // Shown only in the timeline's compact view (one line per step): opens this step's images and details.
  const expand = h("button", {
    type: "button",
    class: "expand link",
    "aria-expanded": "false",
    "aria-label": `Details of step ${step.sequence}`,
    onclick: () => expand.setAttribute("aria-expanded", String(el.classList.toggle("open"))),
  }, "details");
  append(el, [
    h(
      "header",
      { class: "step-head" },
      expand,
      h("span", { class: "seq" }, `#${step.sequence}`),
      " ",
      h("strong", { class: "action" }, step.action || "step"),
      " ",
      h("span", { class: "description" }, step.description),
      " ",
      // A version 1 record kept no outcome.
      legacy ? null : h("span", { class: `outcome ${failed ? "bad" : "ok"}` }, failed ? step.result?.errorCode || "failed" : "ok"),
      h("span", { class: "count" }, ` ${legacy ? "" : duration(step.durationMs)} · ${when(step.startTime)}${step.requestedBy ? ` · ${step.requestedBy}` : ""}`),
    ),
    legacy ? h("p", { class: "legacy-note", role: "note" }, "Legacy record (version 1): one screenshot, taken after the action; no before screenshot, arguments or outcome were kept.") : null,
    h(
      "div",
      { class: "step-body" },
      h("div", { class: `shots${legacy ? " shots-one" : ""}` }, before.el, after.el),
      h(
        "div",
        { class: "step-info" },
        legacy ? null : result(step),
        jsonBox("Arguments", "arguments", step.arguments),
        attempts,
        artifacts(step),
        ocrSlot,
        uiTree(step) ?? jsonBox("Response", "response", step.result?.response),
      ),
    ),
  ]);
  const card: StepCard = {
    el,
    step,
    update(next) {
      // A step is stored once; what changes later is its OCR, which never goes back to pending.
      if (card.step.ocr && OCR_DONE.has(card.step.ocr.status) && next.ocr?.status === "pending") return;
      const changed = JSON.stringify(ocrKey(card.step.ocr)) !== JSON.stringify(ocrKey(next.ocr));
      card.step = next;
      if (changed) renderOcr();
    },
  };
  const renderOcr = () => {
    before.frame?.querySelector(".ocr-box")?.remove();
    replaceChildren(ocrSlot, ocrSection(card.step, card.step.ocr, before));
  };
  renderOcr();
  return card;
}

function ocrKey(o: StepOcr | undefined) {
  return o ? [o.status, o.error, o.observations.map((x) => [x.text, x.confidence, rectText(x.bounds)])] : null;
}
