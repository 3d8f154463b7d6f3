import { create, type DescMessage } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor, type UnaryRequest, type UnaryResponse } from "@connectrpc/connect";
import { getAbortSignalReason } from "@connectrpc/connect/protocol";

/** The reason a finished call's signal carries: made once, since an abort without a reason builds a DOMException (a stack trace) per call. */
const CALL_DONE = new ConnectError("the call finished", Code.Canceled);

/**
 * Runs one unary call through the interceptors, as connect's runUnaryCall
 * does: the request's signal aborts on the caller's abort (Canceled), at
 * the local deadline (DeadlineExceeded, "the operation timed out", which
 * farmTransport's grace turns into farm's DEADLINE_EXCEEDED) and when the
 * call ends. One AbortController and one timer per call, where
 * runUnaryCall links three signals and aborts without a reason.
 */
export async function runUnary<I extends DescMessage, O extends DescMessage>(
  interceptors: Interceptor[],
  req: Omit<UnaryRequest<I, O>, "signal" | "message"> & { message: UnaryRequest<I, O>["message"] | Parameters<typeof create<I>>[1] },
  callerSignal: AbortSignal | undefined,
  timeoutMs: number | undefined,
  last: (req: UnaryRequest<I, O>) => Promise<UnaryResponse<I, O>>,
): Promise<UnaryResponse<I, O>> {
  type AnyFn = Parameters<Interceptor>[0];
  let next = last as unknown as AnyFn;
  for (let i = interceptors.length - 1; i >= 0; i--) next = (interceptors[i] as Interceptor)(next);
  const controller = new AbortController();
  const onCallerAbort = () => controller.abort(ConnectError.from(getAbortSignalReason(callerSignal as AbortSignal)));
  if (callerSignal?.aborted) onCallerAbort();
  else callerSignal?.addEventListener("abort", onCallerAbort);
  const timer = timeoutMs === undefined ? undefined : setTimeout(() => controller.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded)), timeoutMs);
  try {
    return (await next({ ...req, message: create(req.method.input, req.message as never), signal: controller.signal } as UnaryRequest)) as UnaryResponse<I, O>;
  } catch (err) {
    // The deadline's or the caller's reason wins over what the abort made of the call.
    throw ConnectError.from(controller.signal.aborted ? controller.signal.reason : err);
  } finally {
    clearTimeout(timer);
    callerSignal?.removeEventListener("abort", onCallerAbort);
    if (!controller.signal.aborted) controller.abort(CALL_DONE);
  }
}
