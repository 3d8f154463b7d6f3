import type { ConnectRouter } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { invalidArgument } from "@farm/shared/errors";
import { TokenService, TokenKind, TokenRole, TokenInfoSchema, CreateTokenResponseSchema, ListTokensResponseSchema, RevokeTokenResponseSchema, type TokenInfo } from "@farm/shared/gen/farm/v1/token_service_pb";
import { requirePrincipal } from "./auth.js";
import type { Role, TokenRecord, TokenStore } from "./token-store.js";

const roleOf: Record<TokenRole, Role | undefined> = {
  [TokenRole.UNSPECIFIED]: undefined,
  [TokenRole.VIEWER]: "viewer",
  [TokenRole.OPERATOR]: "operator",
  [TokenRole.ADMIN]: "admin",
};
const roleEnum: Record<Role, TokenRole> = { viewer: TokenRole.VIEWER, operator: TokenRole.OPERATOR, admin: TokenRole.ADMIN };

export interface TokenServiceDeps {
  tokens: TokenStore;
  /** Ends what the revoked token opened and held (streams, attach sessions, dashboard sessions, leases, waits); awaited before the answer. `by`: who revoked it. */
  onRevoked?: (name: string, by: string) => Promise<void> | void;
}

export function registerTokenService(router: ConnectRouter, deps: TokenServiceDeps): void {
  router.service(TokenService, {
    async createToken(req) {
      const kind = req.kind === TokenKind.AGENT ? "agent" : req.kind === TokenKind.USER ? "user" : undefined;
      if (!kind) throw invalidArgument("kind", "kind must be agent or user");
      if (!(req.role in roleOf)) throw invalidArgument("role", "role must be viewer, operator or admin");
      const asked = roleOf[req.role];
      if (kind === "agent" && (asked !== undefined || req.admin)) throw invalidArgument(req.admin ? "admin" : "role", "only user tokens have a role");
      // `admin` is the older spelling of role=admin; the two must agree.
      if (req.admin && asked !== undefined && asked !== "admin") throw invalidArgument("role", `admin conflicts with role ${asked}`);
      const role = kind === "agent" ? null : req.admin ? "admin" : (asked ?? "operator");
      const { record, secret } = await deps.tokens.create(req.name, kind, role);
      return create(CreateTokenResponseSchema, { info: toInfo(record), token: secret });
    },
    async listTokens(req) {
      const page = await deps.tokens.listPage(req);
      return create(ListTokensResponseSchema, { tokens: page.items.map(toInfo), nextPageToken: page.nextPageToken });
    },
    async revokeToken(req, ctx) {
      if (!req.name) throw invalidArgument("name", "name is required");
      const by = requirePrincipal(ctx).tokenName;
      const info = toInfo(await deps.tokens.revoke(req.name));
      // Answered once the token is refused on every replica, not only here (what it held ends meanwhile).
      await Promise.all([deps.onRevoked?.(req.name, by), deps.tokens.revokedEverywhere()]);
      return create(RevokeTokenResponseSchema, { info });
    },
  });
}

function toInfo(r: TokenRecord): TokenInfo {
  return create(TokenInfoSchema, {
    name: r.name,
    kind: r.kind === "agent" ? TokenKind.AGENT : TokenKind.USER,
    admin: r.admin,
    role: r.role === null ? TokenRole.UNSPECIFIED : roleEnum[r.role],
    agentId: r.agentId ?? "",
    createTime: timestampFromMs(r.createdAt),
    revokeTime: r.revokedAt === null ? undefined : timestampFromMs(r.revokedAt),
  });
}
