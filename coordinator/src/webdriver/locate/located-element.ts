import type { UiElement } from "@farm/shared/gen/farm/v1/ui_pb";

// The contract between the WebDriver endpoint and its locators (one file so
// both sides can be built apart). A located element is where it sat in the UI
// tree when it was found: the child indexes from the root, and the element.
export interface LocatedElement {
  readonly path: readonly number[];
  readonly element: UiElement;
}

// W3C locator strategies plus Appium's Android ones that farm answers.
export const locatorStrategies = ["id", "accessibility id", "xpath", "-android uiautomator", "class name"] as const;
export type LocatorStrategy = (typeof locatorStrategies)[number];
