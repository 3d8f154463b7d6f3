import type { LiveState } from "../../live-state.js";
import { appsTab } from "./apps-tab.js";
import { filesTab } from "./files-tab.js";
import { infoTab } from "./info-tab.js";
import { logsTab } from "./logs-tab.js";
import { shellTab } from "./shell-tab.js";
import type { WorkspaceTab } from "./workspace-tab.js";

/**
 * The tabs beside the live screen, in the order shown: the one place the
 * list is kept. Info comes first: it is the one every role can read.
 */
export function workspaceTabs(state: LiveState): WorkspaceTab[] {
  return [infoTab(state), appsTab, logsTab, shellTab, filesTab];
}
