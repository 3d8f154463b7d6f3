import { timestampDate } from "@bufbuild/protobuf/wkt";
import { PrivacyService } from "@farm/shared/gen/farm/v1/privacy_service_pb";
import { serviceClient } from "@farm/client/transport";
import { clientSession } from "../session.js";
import type { privacyRotateKeyOptions } from "../tree/admin-commands.js";
import type { Action } from "../tree/spec.js";

export const rotateSummaryKey: Action<typeof privacyRotateKeyOptions> = async (input) => {
  const session = clientSession(input);
  const res = await serviceClient(PrivacyService, session.config).rotateSummaryKey({}, { timeoutMs: session.timeoutMs });
  const at = res.rotateTime ? timestampDate(res.rotateTime).toISOString() : "";
  input.ctx.printer.result({ rotateTime: at }, () => `summary key rotated${at ? ` at ${at}` : ""}: every hash shown in place of a secret is made with the new key from now on`);
  return 0;
};
