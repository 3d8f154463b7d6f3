import { toJson } from "@bufbuild/protobuf";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Errors } from "@farm/shared/errors";
import { CliError } from "../cli-error.js";
import { TokenService, TokenKind, TokenRole, TokenInfoSchema, type TokenInfo } from "@farm/shared/gen/farm/v1/token_service_pb";
import { allPages } from "../all-pages.js";
import { parseFlags, requiredString } from "../args.js";
import { serviceClient } from "../client.js";
import { clientOptions, type Command, type CommandGroup } from "../command.js";
import { table } from "../output.js";
import { clientSession } from "../session.js";

const infoJson = (t: TokenInfo) => toJson(TokenInfoSchema, t, { alwaysEmitImplicit: true });
const kindName = (k: TokenKind) => (k === TokenKind.AGENT ? "agent" : k === TokenKind.USER ? "user" : "unknown");
const roles: Record<string, TokenRole> = { viewer: TokenRole.VIEWER, operator: TokenRole.OPERATOR, admin: TokenRole.ADMIN };
const roleName = (r: TokenRole) => Object.keys(roles).find((k) => roles[k] === r) ?? "";

const create: Command = {
  name: "create",
  summary: "Create a token; the secret is printed once (user tokens: --role viewer|operator|admin, default operator)",
  usage: "farm token create --kind agent|user --name NAME [--role viewer|operator|admin] [--admin]",
  options: { ...clientOptions, kind: { type: "string" }, name: { type: "string" }, role: { type: "string" }, admin: { type: "boolean" } },
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const kindText = requiredString(parsed, "kind");
    const kind = kindText === "agent" ? TokenKind.AGENT : kindText === "user" ? TokenKind.USER : undefined;
    if (kind === undefined) throw new CliError(Errors.INVALID_ARGUMENT, `--kind must be agent or user, got "${kindText}"`, "kind");
    const name = requiredString(parsed, "name");
    // --admin is the older spelling of --role admin.
    const admin = parsed.values["admin"] === true;
    if (admin && kind !== TokenKind.USER) throw new CliError(Errors.INVALID_ARGUMENT, "--admin is only for user tokens", "admin");
    const roleText = parsed.values["role"];
    let role = TokenRole.UNSPECIFIED;
    if (typeof roleText === "string") {
      if (kind !== TokenKind.USER) throw new CliError(Errors.INVALID_ARGUMENT, "--role is only for user tokens: an agent token may only attach its agent", "role");
      const r = roles[roleText];
      if (r === undefined) throw new CliError(Errors.INVALID_ARGUMENT, `--role must be viewer, operator or admin, got "${roleText}"`, "role");
      if (admin && r !== TokenRole.ADMIN) throw new CliError(Errors.INVALID_ARGUMENT, `--admin conflicts with --role ${roleText}`, "role");
      role = r;
    }
    const session = clientSession(ctx, parsed);
    const res = await serviceClient(TokenService, session.config).createToken(
      { kind, name, admin, role },
      { timeoutMs: session.timeoutMs },
    );
    ctx.printer.result({ token: res.token, info: res.info ? infoJson(res.info) : null }, () =>
      [`${kindText} token "${name}"${res.info?.role ? ` (${roleName(res.info.role)})` : ""} created. Store it now; it is not shown again:`, res.token].join("\n"),
    );
    return 0;
  },
};

const list: Command = {
  name: "list",
  summary: "List tokens (names, kinds, roles, bound agents; never secrets)",
  usage: "farm token list",
  options: clientOptions,
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options);
    const session = clientSession(ctx, parsed);
    const client = serviceClient(TokenService, session.config);
    const tokens = await allPages(async (page) => {
      const res = await client.listTokens(page, { timeoutMs: session.timeoutMs });
      return { items: res.tokens, nextPageToken: res.nextPageToken };
    });
    ctx.printer.result({ tokens: tokens.map(infoJson) }, () =>
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
      ),
    );
    return 0;
  },
};

const revoke: Command = {
  name: "revoke",
  summary: "Revoke a token by name; it stops working at once and its open streams, attach sessions and dashboard sessions end",
  usage: "farm token revoke NAME",
  options: clientOptions,
  positionals: true,
  async run(ctx) {
    const parsed = parseFlags(ctx.args, this.options, true);
    const name = parsed.positionals[0];
    if (!name || parsed.positionals.length > 1) throw new CliError(Errors.INVALID_ARGUMENT, "expected exactly one token NAME", "name");
    const session = clientSession(ctx, parsed);
    const res = await serviceClient(TokenService, session.config).revokeToken({ name }, { timeoutMs: session.timeoutMs });
    ctx.printer.result({ info: res.info ? infoJson(res.info) : null }, () => `token "${name}" revoked`);
    return 0;
  },
};

export const tokenGroup: CommandGroup = {
  name: "token",
  summary: "Manage agent and user tokens (admin)",
  commands: [create, list, revoke],
};
