import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { Health, HealthCheckResponseSchema, HealthCheckResponse_ServingStatus as Status } from "@farm/shared/gen/grpc/health/v1/health_pb";

/** grpc.health.v1: "" is the server as a whole; each farm service by name. */
export function registerHealthService(
  router: ConnectRouter,
  deps: { services: string[]; serving: () => boolean; closed: AbortSignal },
): void {
  const status = (service: string): Status => {
    if (service !== "" && !deps.services.includes(service)) return Status.SERVICE_UNKNOWN;
    return deps.serving() ? Status.SERVING : Status.NOT_SERVING;
  };
  router.service(Health, {
    check(req) {
      const s = status(req.service);
      if (s === Status.SERVICE_UNKNOWN) throw new ConnectError(`unknown service ${req.service}`, Code.NotFound);
      return create(HealthCheckResponseSchema, { status: s });
    },
    async *watch(req, ctx: HandlerContext) {
      yield create(HealthCheckResponseSchema, { status: status(req.service) });
      // Status only changes at shutdown; then say so and end.
      await new Promise<void>((resolve) => {
        if (deps.closed.aborted || ctx.signal.aborted) return resolve();
        deps.closed.addEventListener("abort", () => resolve(), { once: true });
        ctx.signal.addEventListener("abort", () => resolve(), { once: true });
      });
      if (!ctx.signal.aborted) yield create(HealthCheckResponseSchema, { status: Status.NOT_SERVING });
    },
  });
}
