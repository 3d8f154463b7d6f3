import { randomUUID } from "node:crypto";
import { errorSpecOf, Errors, farmError, type ActionOutcome } from "@farm/shared/errors";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { validatePackageName, type RetryObserver } from "../app-sdk/android-endpoint.js";
import { captureAppHierarchy, captureHierarchy, type HierarchyResult } from "../evidence/still-capture.js";
import { countNodes, normalizeSdkTree, parseUiAutomatorXml, UiTreeParseError, type UiElementInit } from "./ui-tree.js";

export interface UiTree {
  source: "uiautomator" | "app-sdk";
  roots: UiElementInit[];
  nodeCount: number;
}

/** What is kept back from the caller's budget for the answer's way back. */
const RETURN_MARGIN_MS = 200;

/**
 * Reads the screen's UI tree now (a read: no lock, no journal, no input),
 * from UIAutomator or, with an app package, from that app's SDK; the raw
 * readers are the evidence capture's, so `farm ui tree` sees what a still
 * bundle stores. A failure is a farm error: the reader's code when the
 * error table has it (COMMAND_TIMEOUT, DEVICE_OFFLINE, the bridge_* codes),
 * else UI_TREE_FAILED naming the reader's own code (DEVICE_LOCKED,
 * DEVICE_ASLEEP, HIERARCHY_DUMP_FAILED, ...). `outcome` is attached to
 * every error (a tap by element passes NOT_DISPATCHED).
 */
export async function readUiTree(adb: AdbServerAddress, serial: string, appPackage: string, deadlineMs: number, outcome?: ActionOutcome, onRetry?: RetryObserver): Promise<UiTree> {
  const end = deadlineMs - RETURN_MARGIN_MS;
  const remaining = () => Math.max(0, end - Date.now());
  const fromApp = appPackage !== "";
  if (fromApp) {
    try {
      validatePackageName(appPackage);
    } catch (err) {
      throw farmError(Errors.INVALID_ARGUMENT, (err as Error).message, "app_package", outcome);
    }
  }
  if (remaining() <= 0) throw farmError(Errors.COMMAND_TIMEOUT, "no time was left of the call's deadline to read the UI tree", undefined, outcome);
  const raw = fromApp ? await captureAppHierarchy(adb, serial, appPackage, remaining, onRetry) : await captureHierarchy(adb, serial, `tree-${randomUUID()}`, remaining);
  const source = fromApp ? "app-sdk" : "uiautomator";
  if (raw.error || !raw.xml) throw readerError(raw, source, outcome);
  let roots: UiElementInit[];
  try {
    if (fromApp) {
      let json: unknown;
      try {
        json = JSON.parse(raw.xml.toString("utf8"));
      } catch {
        throw new UiTreeParseError("the app's SDK answered with something other than JSON");
      }
      roots = normalizeSdkTree(json);
    } else {
      roots = parseUiAutomatorXml(raw.xml.toString("utf8"));
    }
  } catch (err) {
    if (!(err instanceof UiTreeParseError)) throw err;
    throw farmError(Errors.UI_TREE_FAILED, `the UI tree from ${source} could not be read: ${err.message}`, undefined, outcome);
  }
  return { source, roots, nodeCount: countNodes(roots) };
}

function readerError(raw: HierarchyResult, source: string, outcome: ActionOutcome | undefined) {
  const e = raw.error ?? { code: "HIERARCHY_INVALID", message: "the reader returned no document", component: null };
  const spec = errorSpecOf(e.code);
  if (spec) return farmError(spec, `the UI tree could not be read from ${source}: ${e.message}`, undefined, outcome);
  return farmError(Errors.UI_TREE_FAILED, `the UI tree could not be read from ${source} (${e.code}): ${e.message}`, undefined, outcome);
}
