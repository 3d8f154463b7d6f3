import { Code } from "@connectrpc/connect";
import { farmError } from "@farm/shared/errors";

/** Stable codes for app endpoint discovery, as the app bridge contract names them. */
export const BridgeCodes = {
  discoveryFailed: "bridge_endpoint_discovery_failed",
  invalid: "bridge_endpoint_invalid",
  packageMismatch: "bridge_package_mismatch",
  notReady: "bridge_not_ready",
  identityMismatch: "bridge_identity_mismatch",
  forwardNotOwned: "bridge_forward_not_owned",
} as const;

export type BridgeCode = (typeof BridgeCodes)[keyof typeof BridgeCodes];

export function bridgeError(code: BridgeCode, message: string, field?: string) {
  const grpc = code === BridgeCodes.notReady ? Code.Unavailable : Code.FailedPrecondition;
  return farmError(grpc, code, message, field);
}
