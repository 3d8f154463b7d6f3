import { create } from "@bufbuild/protobuf";
import { ResolvedElementSchema } from "@farm/shared/gen/farm/v1/device_service_pb";
import { UiElementSchema } from "@farm/shared/gen/farm/v1/ui_pb";
import { describe, expect, it } from "vitest";
import { CliError } from "../cli-error.js";
import { tappedLine, treeText } from "../ui-format.js";
import { elementSelector } from "./ui.js";
import { cliRefusal as refusal } from "../testing/cli-refusal.js";

describe("elementSelector (farm input tap --id|--text|--desc)", () => {
  it("is undefined without a selector flag, so every old spelling is unchanged", () => {
    expect(elementSelector("tap", ["1", "2"], {})).toBeUndefined();
    expect(elementSelector("text", ["hello"], {})).toBeUndefined();
  });

  it("makes the one selector given", () => {
    expect(elementSelector("tap", [], { id: "com.example:id/next" })?.by).toEqual({ case: "resourceId", value: "com.example:id/next" });
    expect(elementSelector("tap", [], { text: "Sign in" })?.by).toEqual({ case: "text", value: "Sign in" });
    expect(elementSelector("tap", [], { desc: "Back" })?.by).toEqual({ case: "contentDesc", value: "Back" });
  });

  it("refuses two selectors, a selector with X Y or on another input, and an empty one", () => {
    expect(refusal(() => elementSelector("tap", [], { id: "a", desc: "b" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "desc" });
    expect(refusal(() => elementSelector("tap", ["1", "2"], { text: "a" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "tap" });
    expect(refusal(() => elementSelector("swipe", ["1", "2", "3", "4"], { text: "a" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "text" });
    expect(refusal(() => elementSelector("tap", [], { id: "" }))).toMatchObject({ code: "INVALID_ARGUMENT", field: "id" });
  });
});

describe("UI tree output", () => {
  const button = create(UiElementSchema, {
    type: "android.widget.Button",
    text: "Next",
    resourceId: "com.example:id/next",
    bounds: { left: 42, top: 693, right: 1038, bottom: 840 },
    enabled: true,
    clickable: true,
    packageName: "com.example",
  });
  const root = create(UiElementSchema, {
    type: "android.widget.FrameLayout",
    bounds: { left: 0, top: 0, right: 1080, bottom: 2400 },
    enabled: true,
    packageName: "com.example",
    children: [button, create(UiElementSchema, { type: "Icon", contentDesc: "Cart", bounds: { left: 1, top: 2, right: 3, bottom: 4 }, enabled: false, focused: true, confidence: 0.875 })],
  });

  it("indents children and shows text, id, description, bounds and flags", () => {
    expect(treeText([root]).split("\n")).toEqual([
      "android.widget.FrameLayout [0,0][1080,2400]",
      "  android.widget.Button \"Next\" id=com.example:id/next [42,693][1038,840] clickable",
      "  Icon desc=\"Cart\" [1,2][3,4] focused disabled confidence=0.88",
    ]);
    expect(treeText([root], true).split("\n")[1]).toMatch(/ pkg=com\.example$/);
  });

  it("says what a tap by element hit", () => {
    const r = create(ResolvedElementSchema, { element: button, x: 540, y: 766 });
    expect(tappedLine(r)).toBe("tapped android.widget.Button \"Next\" at (540, 766) [42,693][1038,840]");
  });
});
