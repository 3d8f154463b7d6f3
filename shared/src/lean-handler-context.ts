import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues, type ContextValues, type HandlerContext } from "@connectrpc/connect";
import { getAbortSignalReason } from "@connectrpc/connect/protocol";

export interface LeanHandlerContextInit {
  service: DescService;
  method: DescMethod;
  protocolName: string;
  requestMethod: string;
  url: string;
  /** The call's deadline from now; none when undefined. */
  timeoutMs?: number | undefined;
  /** Aborts the call's signal with its reason (the caller left, the coordinator cancelled). */
  requestSignal?: AbortSignal | undefined;
  /** Taken as it is, not copied: the caller built it for this one call. */
  requestHeader: Headers;
  responseHeader?: ConstructorParameters<typeof Headers>[0];
  responseTrailer?: ConstructorParameters<typeof Headers>[0];
  contextValues?: ContextValues | undefined;
}

/** A handler context and the means to end its signal (Connect's HandlerContextController). */
export interface LeanHandlerContext extends HandlerContext {
  abort(reason?: unknown): void;
}

/**
 * The handler context Connect's createHandlerContext makes, with the same
 * signal (aborted at the deadline with DeadlineExceeded "the operation timed
 * out", when the request signal aborts with its reason, or by abort()), but
 * per call one AbortController and at most one listener and one timer,
 * where Connect links a deadline controller and a second controller by two
 * to three listeners and copies the request headers: the routed hot path
 * makes one on the coordinator and one on the agent for every call.
 */
export function leanHandlerContext(init: LeanHandlerContextInit): LeanHandlerContext {
  const controller = new AbortController();
  const { requestSignal } = init;
  let timer: NodeJS.Timeout | undefined;
  const end = (reason?: unknown): void => {
    clearTimeout(timer);
    requestSignal?.removeEventListener("abort", onRequestAbort);
    if (!controller.signal.aborted) controller.abort(reason);
  };
  function onRequestAbort(): void {
    end(getAbortSignalReason(requestSignal as AbortSignal));
  }
  const deadlineAt = init.timeoutMs === undefined ? undefined : Date.now() + init.timeoutMs;
  if (init.timeoutMs !== undefined) {
    if (init.timeoutMs <= 0) end(timedOut());
    else timer = setTimeout(() => end(timedOut()), init.timeoutMs);
  }
  if (requestSignal?.aborted) onRequestAbort();
  else requestSignal?.addEventListener("abort", onRequestAbort);
  return {
    service: init.service,
    method: init.method,
    protocolName: init.protocolName,
    requestMethod: init.requestMethod,
    url: init.url,
    signal: controller.signal,
    timeoutMs: deadlineAt === undefined ? () => undefined : () => deadlineAt - Date.now(),
    requestHeader: init.requestHeader,
    responseHeader: new Headers(init.responseHeader),
    responseTrailer: new Headers(init.responseTrailer),
    values: init.contextValues ?? createContextValues(),
    abort: end,
  };
}

function timedOut(): ConnectError {
  return new ConnectError("the operation timed out", Code.DeadlineExceeded);
}
