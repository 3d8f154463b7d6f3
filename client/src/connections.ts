import type { Http2SessionManager } from "@connectrpc/connect-node";

/**
 * The HTTP/2 connections one CLI run opened. A process that exits closes
 * them for free; `main` run in process (tests, embedding) would leave them
 * open to the coordinator, so it closes them when it returns.
 */
export interface Connections {
  /** Called by each transport the run creates, with its session manager. */
  track(manager: Http2SessionManager): void;
  /** Closes every tracked connection (and any stream still open on it); a transport made after this is aborted as it is tracked. */
  closeAll(): void;
  /** How many session managers were tracked (tests). */
  readonly tracked: number;
}

export function connectionScope(): Connections {
  const managers: Http2SessionManager[] = [];
  let closed = false;
  return {
    track(manager) {
      managers.push(manager);
      if (closed) manager.abort();
    },
    closeAll() {
      closed = true;
      for (const m of managers) m.abort();
    },
    get tracked() {
      return managers.length;
    },
  };
}
