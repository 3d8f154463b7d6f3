// The contract between the device workspace and its tabs (Apps, Logs, Shell,
// Files, Info), so each tab can be built in its own file.

/** The phone a workspace shows, as the tab should use it right now. */
export interface WorkspaceTarget {
  /** The page's key: the phone's physical id. */
  readonly physicalId: string;
  /** The serial to route calls by (empty while no alias of the phone is online). */
  readonly serial: string;
  /** The lease token this browser tab holds for the phone (empty when it holds none): sent as x-farm-lease. */
  readonly leaseToken: string;
  /** The recorded session running on the lease, if any: sent as x-farm-session. */
  readonly sessionId: string;
  /** Whether the signed-in user may act on the phone now (holds its lease here, or is an admin holding it). */
  readonly canAct: boolean;
}

/** A tab's content, built when the tab is first opened. */
export interface WorkspaceTabView {
  readonly el: HTMLElement;
  /** The target changed (lease taken or released, serial back online): redraw what depends on it. */
  update(target: WorkspaceTarget): void;
  /** The page is left: stop streams and timers. */
  close(): void;
}

export interface WorkspaceTab {
  readonly id: string;
  readonly title: string;
  open(target: WorkspaceTarget): WorkspaceTabView;
}
