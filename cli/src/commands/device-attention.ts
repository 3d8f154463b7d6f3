import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { serviceClient } from "@farm/client/transport";
import { clientSession } from "../session.js";
import type { clearAttentionOptions } from "../tree/device-commands.js";
import type { Action } from "../tree/spec.js";

/** `farm device clear-attention`: an admin puts a phone whose cleanup failed back in the pool. */
export const clearAttention: Action<typeof clearAttentionOptions> = async (input) => {
  const session = clientSession(input);
  const client = serviceClient(RegistryService, session.config);
  const res = await client.clearDeviceAttention({ device: input.opts.device }, { timeoutMs: session.timeoutMs });
  input.ctx.printer.result({ physicalId: res.physicalId, cleared: true, reason: res.reason }, () => `${res.physicalId} is back in the pool (it was marked: ${res.reason})`);
  return 0;
};
