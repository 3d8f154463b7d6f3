/**
 * A signal that aborts when any of `signals` does, with the first one's
 * reason, and lets go of them on `dispose()`. Not AbortSignal.any: a relay
 * links each stream to its replica's long-lived "gone" signal, and a
 * listener left on that for every adb stream of a day-long tunnel would
 * pile up; here each is removed when its stream ends.
 */
export function linkedAbort(...signals: AbortSignal[]): { signal: AbortSignal; dispose(): void } {
  const ctl = new AbortController();
  const listeners = signals.map((s) => {
    const onAbort = () => ctl.abort(s.reason);
    return { s, onAbort };
  });
  const dispose = () => {
    for (const { s, onAbort } of listeners) s.removeEventListener("abort", onAbort);
  };
  const already = signals.find((s) => s.aborted);
  if (already) {
    ctl.abort(already.reason);
    return { signal: ctl.signal, dispose: () => {} };
  }
  for (const { s, onAbort } of listeners) s.addEventListener("abort", onAbort, { once: true });
  ctl.signal.addEventListener("abort", dispose, { once: true });
  return { signal: ctl.signal, dispose };
}
