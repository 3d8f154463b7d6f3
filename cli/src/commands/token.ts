import { toJson } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Errors } from "@farm/shared/errors";
import { TokenService, TokenKind, TokenRole, TokenInfoSchema, type TokenInfo } from "@farm/shared/gen/farm/v1/token_service_pb";
import { allPages } from "@farm/client/all-pages";
import { CliError } from "../cli-error.js";
import { serviceClient } from "@farm/client/transport";
import { table } from "../output.js";
import { clientSession } from "../session.js";
import type { tokenCreateOptions, tokenListOptions, tokenRevokeOptions } from "../tree/admin-commands.js";
import type { Action } from "../tree/spec.js";

const infoJson = (t: TokenInfo) => toJson(TokenInfoSchema, t, { alwaysEmitImplicit: true });
const kindName = (k: TokenKind) => (k === TokenKind.AGENT ? "agent" : k === TokenKind.USER ? "user" : "unknown");
const roles: Record<string, TokenRole> = { viewer: TokenRole.VIEWER, operator: TokenRole.OPERATOR, admin: TokenRole.ADMIN };
const roleName = (r: TokenRole) => Object.keys(roles).find((k) => roles[k] === r) ?? "";

export const createToken: Action<typeof tokenCreateOptions> = async (input) => {
  const { opts, ctx } = input;
  const kindText = opts.kind;
  const kind = kindText === "agent" ? TokenKind.AGENT : kindText === "user" ? TokenKind.USER : undefined;
  if (kind === undefined) throw new CliError(Errors.INVALID_ARGUMENT, `--kind must be agent or user, got "${kindText}"`, "kind");
  const name = opts.name;
  if (name === "") throw new CliError(Errors.INVALID_ARGUMENT, "--name is required", "name");
  // --admin is the older spelling of --role admin.
  const admin = opts.admin;
  if (admin && kind !== TokenKind.USER) throw new CliError(Errors.INVALID_ARGUMENT, "--admin is only for user tokens", "admin");
  let role = TokenRole.UNSPECIFIED;
  if (opts.role !== undefined) {
    if (kind !== TokenKind.USER) throw new CliError(Errors.INVALID_ARGUMENT, "--role is only for user tokens: an agent token may only attach its agent", "role");
    const r = roles[opts.role] as TokenRole;
    if (admin && r !== TokenRole.ADMIN) throw new CliError(Errors.INVALID_ARGUMENT, `--admin conflicts with --role ${opts.role}`, "role");
    role = r;
  }
  const session = clientSession(input);
  const res = await serviceClient(TokenService, session.config).createToken({ kind, name, admin, role }, { timeoutMs: session.timeoutMs });
  ctx.printer.result(
    { token: res.token, info: res.info ? infoJson(res.info) : null },
    () =>
      [
        `${kindText} token "${name}"${res.info?.role ? ` (${roleName(res.info.role)})` : ""} created. Store it now; it is not shown again:`,
        res.token,
        // The line to paste, as `lease acquire` prints: the variable each side reads its token from.
        `export ${kind === TokenKind.AGENT ? "FARM_AGENT_TOKEN" : "FARM_TOKEN"}=${res.token}`,
      ].join("\n"),
  );
  return 0;
};

export const listTokens: Action<typeof tokenListOptions> = async (input) => {
  const session = clientSession(input);
  const client = serviceClient(TokenService, session.config);
  const tokens = await allPages(async (page) => {
    const res = await client.listTokens(page, { timeoutMs: session.timeoutMs });
    return { items: res.tokens, nextPageToken: res.nextPageToken };
  });
  input.ctx.printer.result({ tokens: tokens.map(infoJson) }, () =>
    table(
      ["NAME", "KIND", "ROLE", "AGENT", "CREATED", "REVOKED"],
      tokens.map((t) => [
        t.name,
        kindName(t.kind),
        roleName(t.role),
        t.agentId,
        t.createTime ? new Date(timestampMs(t.createTime)).toISOString() : "",
        t.revokeTime ? new Date(timestampMs(t.revokeTime)).toISOString() : "",
      ]),
    ));
  return 0;
};

export const revokeToken: Action<typeof tokenRevokeOptions> = async (input) => {
  const [name] = input.args as [string];
  const session = clientSession(input);
  const res = await serviceClient(TokenService, session.config).revokeToken({ name }, { timeoutMs: session.timeoutMs });
  input.ctx.printer.result({ info: res.info ? infoJson(res.info) : null }, () => `token "${name}" revoked`);
  return 0;
};
