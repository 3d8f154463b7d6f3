import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { DescService } from "@bufbuild/protobuf";
import { CliError, ErrorCodes, farmError } from "@farm/shared/errors";
import type { ClientConfig } from "./config.js";

/** A client for one farm service, authenticated with the resolved token. */
export function serviceClient<S extends DescService>(service: S, config: ClientConfig): Client<S> {
  if (!config.token) {
    throw new CliError(
      ErrorCodes.unauthenticated,
      "no token: pass --token-file, set FARM_TOKEN, put a token in the config file, or run `farm standalone` locally",
      "token",
    );
  }
  const token = config.token;
  const auth: Interceptor = (next) => async (req) => {
    req.header.set("authorization", `Bearer ${token}`);
    try {
      return await next(req);
    } catch (err) {
      throw explainUnavailable(err, config);
    }
  };
  return createClient(service, createGrpcTransport({ baseUrl: config.coordinator, interceptors: [auth] }));
}

function explainUnavailable(err: unknown, config: ClientConfig): unknown {
  const ce = ConnectError.from(err);
  if (ce.code !== Code.Unavailable) return err;
  if (!/ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ECONNRESET|socket hang up/i.test(ce.rawMessage)) return err;
  return farmError(
    Code.Unavailable,
    ErrorCodes.coordinatorUnavailable,
    `cannot reach the coordinator at ${config.coordinator} (from ${config.coordinatorSource}): ${ce.rawMessage}`,
    "coordinator",
  );
}
