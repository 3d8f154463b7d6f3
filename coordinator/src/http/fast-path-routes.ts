import { createMethodImplSpec, createServiceImplSpec, type ConnectRouter, type MethodImplSpec } from "@connectrpc/connect";
import type { Compression } from "@connectrpc/connect/protocol";
import { ANSWER_COMPRESSION } from "./answer-compression.js";

/** Which methods a fast path serves: the unary ones, or the streaming ones (client, server and bidi). */
export type FastPathKind = "unary" | "stream";

type SpecOf<K extends FastPathKind> = K extends "unary" ? Extract<MethodImplSpec, { kind: "unary" }> : Exclude<MethodImplSpec, { kind: "unary" }>;

/** A method a fast path serves, with the options Connect serves it with (compressions: the coordinator's, answer-compression.ts, when the service sets none). */
export interface FastPathRoute<K extends FastPathKind> {
  spec: SpecOf<K>;
  readMaxBytes: number;
  acceptCompression: readonly Compression[];
}

/** The options a router registration is given that a fast path must honour as Connect does. */
export interface RouteOptions {
  readMaxBytes?: number;
  acceptCompression?: Compression[];
  grpc?: boolean;
}

/** The methods of one kind registered on a router, by request path, with the options Connect serves them with. */
export class FastPathRoutes<K extends FastPathKind> {
  readonly #byPath = new Map<string, FastPathRoute<K>>();

  constructor(readonly kind: K) {}

  get(path: string): FastPathRoute<K> | undefined {
    return this.#byPath.get(path);
  }

  add(spec: MethodImplSpec, options: RouteOptions | undefined): void {
    if ((spec.kind === "unary") !== (this.kind === "unary") || options?.grpc === false) return;
    this.#byPath.set(`/${spec.method.parent.typeName}/${spec.method.name}`, {
      spec: spec as SpecOf<K>,
      readMaxBytes: options?.readMaxBytes ?? 0xffffffff,
      acceptCompression: options?.acceptCompression ?? ANSWER_COMPRESSION,
    });
  }
}

/**
 * The router with every method also recorded in each of `routes` (each
 * keeps its kind), with the options it is registered with: the fast paths
 * serve the same implementations, under the same caps, as Connect.
 */
export function recordingRouter(router: ConnectRouter, routes: readonly FastPathRoutes<FastPathKind>[]): ConnectRouter {
  const recording: ConnectRouter = Object.create(router) as ConnectRouter;
  const record = (spec: MethodImplSpec, options: RouteOptions | undefined) => {
    for (const r of routes) r.add(spec, options);
  };
  recording.service = (service, implementation, options) => {
    router.service(service, implementation, options);
    for (const spec of Object.values(createServiceImplSpec(service, implementation).methods)) record(spec, options);
    return recording;
  };
  recording.rpc = (method, implementation, options) => {
    router.rpc(method, implementation, options);
    record(createMethodImplSpec(method, implementation), options);
    return recording;
  };
  return recording;
}
