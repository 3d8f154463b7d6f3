import { create } from "@bufbuild/protobuf";
import { UiElementSchema } from "@farm/shared/gen/farm/v1/ui_pb";
import { describe, expect, it } from "vitest";
import { CliError } from "../cli-error.js";
import { waitSelector } from "../commands/wait.js";
import { diagnosisSummary, flatten, matchingElements, plainElement, PollTrace, waitDiagnosis, type WaitSettings } from "./wait-diagnosis.js";
import { cliRefusal as refusal } from "../testing/cli-refusal.js";

const screen = () =>
  [
    create(UiElementSchema, {
      type: "android.widget.FrameLayout",
      bounds: { left: 0, top: 0, right: 1080, bottom: 2400 },
      packageName: "com.android.settings",
      children: [
        create(UiElementSchema, { type: "android.widget.TextView", text: "Display", resourceId: "android:id/title", bounds: { left: 0, top: 300, right: 1080, bottom: 420 }, enabled: true }),
        // Same text, no area: not on the screen.
        create(UiElementSchema, { type: "android.widget.TextView", text: "Hidden", bounds: { left: 10, top: 10, right: 10, bottom: 40 } }),
        // Off its window.
        create(UiElementSchema, { type: "android.widget.TextView", text: "Below", bounds: { left: 0, top: 2500, right: 1080, bottom: 2600 } }),
        create(UiElementSchema, { type: "android.widget.ImageButton", contentDesc: "Navigate up", bounds: { left: 0, top: 63, right: 147, bottom: 210 }, clickable: true }),
      ],
    }),
  ].map(plainElement);

const settings = (over: Partial<WaitSettings> = {}): WaitSettings => ({ selector: { by: "text", value: "NoSuchThing" }, gone: false, timeoutMs: 1500, intervalMs: 250, appPackage: "", ...over });

describe("matchingElements", () => {
  it("matches the whole value of one field, on the screen only (as a tap does)", () => {
    const roots = screen();
    expect(matchingElements(roots, { by: "text", value: "Display" }).map((e) => e.resourceId)).toEqual(["android:id/title"]);
    expect(matchingElements(roots, { by: "text", value: "display" })).toEqual([]);
    expect(matchingElements(roots, { by: "text", value: "Disp" })).toEqual([]);
    expect(matchingElements(roots, { by: "resourceId", value: "android:id/title" })).toHaveLength(1);
    expect(matchingElements(roots, { by: "contentDesc", value: "Navigate up" })).toHaveLength(1);
    expect(matchingElements(roots, { by: "text", value: "Hidden" })).toEqual([]);
    expect(matchingElements(roots, { by: "text", value: "Below" })).toEqual([]);
  });

  it("flattens a tree into type, text, ids and bounds", () => {
    const flat = flatten(screen());
    expect(flat).toHaveLength(5);
    expect(flat[1]).toEqual({ type: "android.widget.TextView", text: "Display", resourceId: "android:id/title", contentDesc: "", bounds: { left: 0, top: 300, right: 1080, bottom: 420 } });
  });
});

describe("waitSelector", () => {
  it("takes exactly one of --id, --text, --desc, not empty", () => {
    expect(waitSelector({ text: "OK" })).toEqual({ by: "text", value: "OK" });
    expect(waitSelector({ id: "a:id/b" })).toEqual({ by: "resourceId", value: "a:id/b" });
    expect(waitSelector({ desc: "Back" })).toEqual({ by: "contentDesc", value: "Back" });
    expect(refusal(() => waitSelector({}))).toMatchObject({ code: "INVALID_ARGUMENT" });
    expect(refusal(() => waitSelector({ text: "a", desc: "b" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "desc" });
    expect(refusal(() => waitSelector({ id: "" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "id" });
  });
});

describe("PollTrace and the timeout diagnosis", () => {
  it("keeps the polls, when the tree first had elements, and the screen at the end", () => {
    const t = new PollTrace();
    t.add({ poll: 1, atMs: 0, tookMs: 40, errorCode: "UI_TREE_FAILED", errorMessage: "locked" });
    t.add({ poll: 2, atMs: 290, tookMs: 30, nodeCount: 0, matches: 0 });
    t.add({ poll: 3, atMs: 570, tookMs: 35, nodeCount: 5, matches: 0 });
    t.lastTree = { atMs: 570, source: "uiautomator", nodeCount: 5, roots: screen() };
    const d = waitDiagnosis(settings(), t, { code: "COMMAND_TIMEOUT", message: "no element", waitedMs: 1500.4 }, { farmVersion: "9.9.9", sessionId: "s-1", policySha256: "" });
    expect(d).toMatchObject({
      kind: "farm-wait-diagnosis",
      result: { code: "COMMAND_TIMEOUT" },
      selector: { text: "NoSuchThing" },
      polls: 3,
      failedPolls: 1,
      omittedPolls: 0,
      waitedMs: 1500,
      firstNonEmptyAtMs: 570,
      treeAtMs: 570,
      source: "uiautomator",
      provenance: { farmVersion: "9.9.9", sessionId: "s-1", policySha256: "" },
    });
    expect(d["trace"]).toHaveLength(3);
    expect(d["elements"]).toHaveLength(5);
    expect((d["tree"] as unknown[]).length).toBe(1);
    expect(d["matching"]).toEqual([]);
    // A JSON document, as stored.
    expect(JSON.parse(JSON.stringify(d))).toEqual(d);
  });

  it("says when the tree never had elements, and lists what is still there for --gone", () => {
    const empty = new PollTrace();
    empty.add({ poll: 1, atMs: 0, tookMs: 10, errorCode: "UI_TREE_FAILED", errorMessage: "x" });
    const none = waitDiagnosis(settings(), empty, { code: "COMMAND_TIMEOUT", message: "m", waitedMs: 100 }, { farmVersion: "1", sessionId: "", policySha256: "" });
    expect(none).toMatchObject({ firstNonEmptyAtMs: null, treeAtMs: null, elements: [], tree: null });
    expect(diagnosisSummary(settings(), empty, { code: "COMMAND_TIMEOUT", message: "m", waitedMs: 100 })).toMatch(/never had elements[\s\S]*no poll read the screen/);

    const t = new PollTrace();
    t.add({ poll: 1, atMs: 0, tookMs: 10, nodeCount: 5, matches: 1 });
    t.lastTree = { atMs: 0, source: "uiautomator", nodeCount: 5, roots: screen() };
    const gone = settings({ selector: { by: "text", value: "Display" }, gone: true });
    const d = waitDiagnosis(gone, t, { code: "COMMAND_TIMEOUT", message: "m", waitedMs: 100 }, { farmVersion: "1", sessionId: "", policySha256: "" });
    expect(d["matching"]).toEqual([expect.objectContaining({ text: "Display" })]);
    const summary = diagnosisSummary(gone, t, { code: "COMMAND_TIMEOUT", message: "m", waitedMs: 100 });
    expect(summary).toContain("still there: android.widget.TextView \"Display\"");
    expect(summary).toContain("first had elements at 0 ms");
  });

  it("keeps the first and last polls of a long wait and counts the rest", () => {
    const t = new PollTrace(10);
    for (let i = 1; i <= 25; i++) t.add({ poll: i, atMs: i * 100, tookMs: 5, nodeCount: 3, matches: 0 });
    expect(t.polls).toBe(25);
    expect(t.omitted).toBe(15);
    expect(t.entries().map((e) => e.poll)).toEqual([1, 2, 3, 4, 5, 21, 22, 23, 24, 25]);
    expect(t.firstNonEmptyAtMs).toBe(100);
  });
});
