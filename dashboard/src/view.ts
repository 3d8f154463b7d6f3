import type { LiveState } from "./live-state.js";

/** Renders into root and keeps it current; returns what stops the updates. */
export type View = (root: HTMLElement, state: LiveState, param: string) => () => void;

/** Runs fn at most once per animation frame, however many events arrive. */
export function batched(fn: () => void): () => void {
  let queued = false;
  return () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      fn();
    });
  };
}
