import { Code, ConnectError } from "@connectrpc/connect";

/**
 * The request path of each method URL a transport is asked for, for the one
 * HTTP/2 session it holds to `baseUrl`: URL parsing once per method, not per
 * call; another origin is refused (the session cannot reach it).
 */
export function requestPaths(baseUrl: string): (reqUrl: string) => string {
  const origin = new URL(baseUrl).origin;
  const paths = new Map<string, string>();
  return (reqUrl) => {
    let path = paths.get(reqUrl);
    if (path === undefined) {
      const url = new URL(reqUrl);
      if (url.origin !== origin) throw new ConnectError(`cannot make a request to ${url.origin}: the http2 session is connected to ${origin}`, Code.Internal);
      path = url.pathname + url.search;
      if (paths.size < 1000) paths.set(reqUrl, path);
    }
    return path;
  };
}
