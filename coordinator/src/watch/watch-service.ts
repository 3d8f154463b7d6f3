import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { WatchResponseSchema, WatchService, type WatchResponse } from "@farm/shared/gen/farm/v1/watch_service_pb";
import { requirePrincipal } from "../auth/auth.js";
import { activityDetailFor } from "../routing/command-privacy.js";
import type { Principal } from "../auth/token-store.js";
import type { Summarizer } from "../auth/summary-key.js";
import type { WatchHub } from "./watch-hub.js";
import { stepFor } from "../sessions/step-message.js";

export function registerWatchService(router: ConnectRouter, deps: { hub: WatchHub; summaries: Summarizer }): void {
  router.service(WatchService, {
    async *watch(_req, ctx) {
      const viewer = requirePrincipal(ctx);
      for await (const msg of deps.hub.subscribe(ctx.signal)) yield forViewer(viewer, msg, deps.summaries);
    },
  });
}

/** Live activity (and session steps) show command text, property values and typed text in full only to their caller and admins, like ListActivity. */
function forViewer(viewer: Principal, msg: WatchResponse, key: Summarizer): WatchResponse {
  if (msg.kind.case === "sessionStep") {
    const step = stepFor(viewer, msg.kind.value, key);
    return step === msg.kind.value ? msg : create(WatchResponseSchema, { kind: { case: "sessionStep", value: step } });
  }
  if (msg.kind.case !== "activity") return msg;
  const entry = msg.kind.value;
  const detail = activityDetailFor(viewer, entry, key);
  if (detail === entry.detail) return msg;
  // Messages are shared between watchers: change a copy.
  return create(WatchResponseSchema, { kind: { case: "activity", value: { ...entry, detail } } });
}
