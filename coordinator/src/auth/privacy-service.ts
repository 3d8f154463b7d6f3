import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { timestampNow } from "@bufbuild/protobuf/wkt";
import type { Logger } from "@farm/shared/log";
import { PrivacyService, RotateSummaryKeyResponseSchema } from "@farm/shared/gen/farm/v1/privacy_service_pb";
import { requirePrincipal } from "./auth.js";
import type { SummaryKey } from "./summary-key.js";

/** PrivacyService: an admin rotates the summary key; `onRotated` tells the other replicas. */
export function registerPrivacyService(router: ConnectRouter, deps: { key: SummaryKey; log: Logger; onRotated?: () => Promise<void> }): void {
  router.service(PrivacyService, {
    async rotateSummaryKey(_req, ctx) {
      await deps.key.rotate();
      // Who and when, never the key.
      deps.log.info("summary key rotated", { by: requirePrincipal(ctx).tokenName });
      await deps.onRotated?.();
      return create(RotateSummaryKeyResponseSchema, { rotateTime: timestampNow() });
    },
  });
}
