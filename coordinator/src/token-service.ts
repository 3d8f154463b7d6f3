import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { invalidArgument } from "@farm/shared/errors";
import {
  TokenService,
  TokenKind,
  TokenInfoSchema,
  CreateTokenResponseSchema,
  ListTokensResponseSchema,
  RevokeTokenResponseSchema,
  type TokenInfo,
} from "@farm/shared/gen/farm/v1/token_service_pb";
import type { TokenRecord, TokenStore } from "./token-store.js";

export function registerTokenService(router: ConnectRouter, deps: { tokens: TokenStore }): void {
  router.service(TokenService, {
    createToken(req) {
      const kind =
        req.kind === TokenKind.AGENT ? "agent" : req.kind === TokenKind.USER ? "user" : undefined;
      if (!kind) throw invalidArgument("kind", "kind must be agent or user");
      const { record, secret } = deps.tokens.create(req.name, kind, req.admin);
      return create(CreateTokenResponseSchema, { info: toInfo(record), token: secret });
    },
    listTokens() {
      return create(ListTokensResponseSchema, { tokens: deps.tokens.list().map(toInfo) });
    },
    revokeToken(req) {
      if (!req.name) throw invalidArgument("name", "name is required");
      return create(RevokeTokenResponseSchema, { info: toInfo(deps.tokens.revoke(req.name)) });
    },
  });
}

function toInfo(r: TokenRecord): TokenInfo {
  return create(TokenInfoSchema, {
    name: r.name,
    kind: r.kind === "agent" ? TokenKind.AGENT : TokenKind.USER,
    admin: r.admin,
    createTime: timestampFromMs(r.createdAt),
    revokeTime: r.revokedAt === null ? undefined : timestampFromMs(r.revokedAt),
  });
}
