import type { ConnectRouter } from "@connectrpc/connect";
import { WatchService } from "@farm/shared/gen/farm/v1/watch_service_pb";
import type { WatchHub } from "./watch-hub.js";

export function registerWatchService(router: ConnectRouter, deps: { hub: WatchHub }): void {
  router.service(WatchService, {
    watch(_req, ctx) {
      return deps.hub.subscribe(ctx.signal);
    },
  });
}
