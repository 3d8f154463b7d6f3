import { clientOptions } from "../options/common-options.js";
import { flag, hidden, list, oneOf, parsed, requiredText, text } from "../options/index.js";
import { group, leaf } from "./spec.js";

export const tokenCreateOptions = {
  ...clientOptions,
  kind: { ...requiredText("--kind <kind>", "agent or user", { choices: ["agent", "user"] }) },
  name: requiredText("--name <name>", "Token name (an agent token's agent name)"),
  role: parsed("--role <role>", "A user token's role (default operator)", oneOf(["viewer", "operator", "admin"] as const), { choices: ["viewer", "operator", "admin"] }),
  admin: hidden(flag("--admin", "Old spelling of --role admin")),
};
export const tokenListOptions = clientOptions;
export const tokenRevokeOptions = clientOptions;

export const tokenGroup = group({
  name: "token",
  summary: "Manage agent and user tokens (admin): create, list, revoke",
  commands: [
    leaf({
      name: "create",
      summary: "Create a token; the secret is printed once (user tokens: --role viewer|operator|admin, default operator)",
      options: tokenCreateOptions,
      examples: ["farm token create --kind agent --name lab-host-1", "farm token create --kind user --name alice --role operator"],
      load: async () => (await import("../commands/token.js")).createToken,
    }),
    leaf({ name: "list", summary: "List tokens (names, kinds, roles, bound agents; never secrets)", options: tokenListOptions, load: async () => (await import("../commands/token.js")).listTokens }),
    leaf({
      name: "revoke",
      summary: "Revoke a token by name; it stops working at once and its open streams, attach sessions, dashboard sessions, leases and lease waits end",
      args: [{ name: "name", description: "Token name", required: true }],
      options: tokenRevokeOptions,
      load: async () => (await import("../commands/token.js")).revokeToken,
    }),
  ],
});

export const privacyRotateKeyOptions = clientOptions;

export const privacyGroup = group({
  name: "privacy",
  summary: "What others see of a secret (admin): rotate the key of the hashes shown in place of commands, property values and typed text",
  commands: [
    leaf({
      name: "rotate-key",
      summary: "Replace the coordinator's summary key: hashes shown from now on (of old entries too) no longer match those shown before",
      options: privacyRotateKeyOptions,
      examples: ["farm privacy rotate-key"],
      load: async () => (await import("../commands/privacy.js")).rotateSummaryKey,
    }),
  ],
});

export const selfSignedOptions = {
  host: list("--host <name>", "A DNS name or IP address clients use for the coordinator"),
  outDir: text("--out-dir <dir>", "Where to write ca.pem, ca.key, server.pem, server.key (required)"),
};
export const tlsGroup = group({
  name: "tls",
  summary: "TLS helpers: a self-signed lab CA and coordinator certificate",
  commands: [
    leaf({
      name: "self-signed",
      summary: "Write a lab CA and a coordinator certificate it signs (for labs without a CA)",
      options: selfSignedOptions,
      settings: { kind: "none" },
      examples: ["farm tls self-signed --host coordinator.lab --host 10.0.0.5 --out-dir /etc/farm/tls"],
      load: async () => (await import("../commands/tls.js")).selfSigned,
    }),
  ],
});
