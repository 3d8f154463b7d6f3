import { create, toJson } from "@bufbuild/protobuf";
import { Errors } from "@farm/shared/errors";
import { GetUiTreeResponseSchema, ResolvedElementSchema, TapSchema } from "@farm/shared/gen/farm/v1/device_service_pb";
import type { ElementSelector } from "@farm/shared/gen/farm/v1/ui_pb";
import { selectorFor } from "@farm/client/element-selector";
import { CliError } from "../cli-error.js";
import type { inputOptions } from "../tree/device-commands.js";
import type { Action } from "../tree/spec.js";
import type { uiTreeOptions } from "../tree/ui-commands.js";
import { tappedLine, treeText } from "../ui-format.js";
import { asCli, libraryDevice } from "./device-target.js";

const SELECTOR_USAGE = "farm input tap --id RESOURCE_ID | --text TEXT | --desc CONTENT_DESC";

/**
 * The element a tap names (--id, --text, --desc), checked: at most one,
 * not empty, only for a tap and never together with X Y. Undefined when
 * none is given (every other input keeps its old spelling).
 */
export function elementSelector(kind: string | undefined, values: readonly string[], opts: { id?: string | undefined; text?: string | undefined; desc?: string | undefined }): ElementSelector | undefined {
  const given = ([["id", opts.id], ["text", opts.text], ["desc", opts.desc]] as const).filter((g): g is readonly ["id" | "text" | "desc", string] => g[1] !== undefined);
  if (given.length === 0) return undefined;
  const [name, value] = given[0] as readonly ["id" | "text" | "desc", string];
  if (given.length > 1) throw new CliError(Errors.INVALID_ARGUMENT, `say one of --id, --text or --desc, not ${given.map(([n]) => `--${n}`).join(" and ")}: ${SELECTOR_USAGE}`, (given[1] as readonly [string, string])[0]);
  if (kind !== "tap") throw new CliError(Errors.INVALID_ARGUMENT, `--${name} selects the element of a tap: ${SELECTOR_USAGE}`, name);
  if (values.length > 0) throw new CliError(Errors.INVALID_ARGUMENT, `a tap takes X Y or --${name}, not both: ${SELECTOR_USAGE}`, "tap");
  if (value === "") throw new CliError(Errors.INVALID_ARGUMENT, `--${name} must not be empty`, name);
  return selectorFor(name, value);
}

/** `farm input`: a tap by element here; every other input as before (commands/device.ts). */
export const input: Action<typeof inputOptions> = async (inp) => {
  const [what, ...rest] = inp.args;
  const selector = elementSelector(what, rest, inp.opts);
  if (!selector) return (await import("./device.js")).input(inp);
  const { device, call } = libraryDevice(inp);
  const res = await asCli(device.sendInput({ case: "tap", value: create(TapSchema, { element: selector }) }, call));
  const element = res.element;
  inp.ctx.printer.result(
    {
      actionId: res.actionId,
      dispatched: res.dispatched ?? null,
      ambiguous: res.ambiguous,
      element: element ? toJson(ResolvedElementSchema, element, { alwaysEmitImplicit: true }) : null,
    },
    () => (element ? `${tappedLine(element)} (action ${res.actionId})` : `sent (action ${res.actionId})`),
  );
  return 0;
};

/** `farm ui tree`: the screen's elements, indented; -o json is the GetUiTreeResponse message. */
export const tree: Action<typeof uiTreeOptions> = async (inp) => {
  const { device, call } = libraryDevice(inp);
  const res = await asCli(device.uiTree({ ...call, appPackage: inp.opts.appPackage ?? "" }));
  const json = toJson(GetUiTreeResponseSchema, res, { alwaysEmitImplicit: true }) as Record<string, unknown>;
  inp.ctx.printer.result(json, () => [`${res.source}: ${res.nodeCount} element${res.nodeCount === 1 ? "" : "s"}`, treeText(res.roots, inp.ctx.printer.wide)].filter(Boolean).join("\n"));
  return 0;
};
