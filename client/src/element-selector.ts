import { create } from "@bufbuild/protobuf";
import { Errors } from "@farm/shared/error-codes";
import { ElementSelectorSchema, type ElementSelector } from "@farm/shared/gen/farm/v1/ui_pb";
import { FarmError } from "./farm-error.js";

/** One element of the screen, as a tap names it: exactly one of its resource id, whole text or content description. */
export type ElementBy = { id: string } | { text: string } | { desc: string };

/** The protocol's selector for a name of an element (`farm input tap --id|--text|--desc` builds the same). */
export function selectorFor(name: "id" | "text" | "desc", value: string): ElementSelector {
  const by = name === "id" ? { case: "resourceId" as const, value } : name === "text" ? { case: "text" as const, value } : { case: "contentDesc" as const, value };
  return create(ElementSelectorSchema, { by });
}

/** The selector of an ElementBy, checked: one key of id, text or desc, a non-empty string. */
export function elementSelectorOf(by: ElementBy): ElementSelector {
  const given = (["id", "text", "desc"] as const).filter((k) => (by as Record<string, unknown>)[k] !== undefined);
  if (given.length !== 1) throw new FarmError(Errors.INVALID_ARGUMENT, `name the element by exactly one of id, text or desc (got ${given.length === 0 ? "none" : given.join(" and ")})`, given[1] ?? "element");
  const name = given[0] as "id" | "text" | "desc";
  const value = (by as Record<string, unknown>)[name];
  if (typeof value !== "string" || value === "") throw new FarmError(Errors.INVALID_ARGUMENT, `${name} must be a non-empty string`, name);
  return selectorFor(name, value);
}
