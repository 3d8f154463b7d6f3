import { Errors, refusal } from "@farm/shared/errors";

/** App endpoint discovery failures, as the app bridge contract names them (entries of the error table). */
export const BridgeErrors = {
  discoveryFailed: Errors.bridge_endpoint_discovery_failed,
  invalid: Errors.bridge_endpoint_invalid,
  packageMismatch: Errors.bridge_package_mismatch,
  notReady: Errors.bridge_not_ready,
  identityMismatch: Errors.bridge_identity_mismatch,
  forwardNotOwned: Errors.bridge_forward_not_owned,
} as const;

export type BridgeError = (typeof BridgeErrors)[keyof typeof BridgeErrors];

/** Raised while finding the app's endpoint, before anything is sent to the app: a refusal. */
export function bridgeError(spec: BridgeError, message: string, field?: string) {
  return refusal(spec, message, field);
}
