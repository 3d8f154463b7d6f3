import { randomUUID } from "node:crypto";
import type { Socket } from "node:net";
import { create } from "@bufbuild/protobuf";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { Errors, farmError } from "@farm/shared/errors";
import { listenH2 } from "./listen-h2.js";
import { AdbTunnelService, OpenAdbStreamResponseSchema, OpenTunnelResponseSchema, TunnelSchema, type OpenAdbStreamRequest, type Tunnel } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";

/**
 * A stand-in coordinator for the CLI's side of remote adb: AdbTunnelService
 * over real gRPC (HTTP/2), each adb stream opened on a phone through an adb
 * server, as the agent does. Tests close tunnels with the error the real
 * coordinator would give.
 */
export interface FakeTunnelService {
  url: string;
  /** Open tunnels by id. */
  tunnels: Map<string, Tunnel>;
  /** Lease headers (x-farm-lease) that came with OpenTunnel. */
  leaseHeaders: string[];
  /** OpenAdbStream calls open now that have not sent their first message (a client's spares). */
  waitingStreamCalls(): number;
  /** Ends a tunnel's OpenTunnel stream with this error. */
  close(tunnelId: string, err: Error): void;
  stop(): Promise<void>;
}

export async function startFakeTunnelService(opts: { serial: string; openOnDevice: (service: string) => Promise<Socket> }): Promise<FakeTunnelService> {
  const tunnels = new Map<string, Tunnel>();
  const closers = new Map<string, (err: Error) => void>();
  const leaseHeaders: string[] = [];
  let waiting = 0;
  const handler = connectNodeAdapter({
    routes(router) {
      router.service(AdbTunnelService, {
        async *openTunnel(req, ctx) {
          leaseHeaders.push(ctx.requestHeader.get("x-farm-lease") ?? "");
          // As the coordinator: no serial means the phone of the presented lease.
          const serial = req.target?.serial || (ctx.requestHeader.get("x-farm-lease") === "farml_test" ? opts.serial : "");
          if (serial !== opts.serial) throw farmError(Errors.DEVICE_NOT_FOUND, `no device ${req.target?.serial}`, "target.serial");
          const tunnel = create(TunnelSchema, { tunnelId: randomUUID(), serial: opts.serial, physicalId: "phys-1", agentName: "lab-1", leaseId: "lease-1", owner: "alice", openedAtMs: BigInt(Date.now()) });
          const closed = new Promise<Error | undefined>((resolve) => {
            closers.set(tunnel.tunnelId, resolve);
            ctx.signal.addEventListener("abort", () => resolve(undefined), { once: true });
          });
          tunnels.set(tunnel.tunnelId, tunnel);
          try {
            yield create(OpenTunnelResponseSchema, { kind: { case: "opened", value: tunnel } });
            const why = await closed;
            if (why) throw why;
          } finally {
            tunnels.delete(tunnel.tunnelId);
            closers.delete(tunnel.tunnelId);
          }
        },
        async *openAdbStream(requests) {
          const it = requests[Symbol.asyncIterator]();
          waiting++;
          let first: IteratorResult<OpenAdbStreamRequest>;
          try {
            first = await it.next();
          } finally {
            waiting--;
          }
          if (first.done || first.value.kind.case !== "start") throw farmError(Errors.INVALID_ARGUMENT, "the first message must be start", "start");
          if (!tunnels.has(first.value.kind.value.tunnelId)) throw farmError(Errors.TUNNEL_NOT_FOUND, "no such tunnel", "start.tunnel_id");
          const socket = await opts.openOnDevice(first.value.kind.value.service);
          yield create(OpenAdbStreamResponseSchema, { kind: { case: "opened", value: true } });
          void (async () => {
            try {
              for (;;) {
                const m = await it.next();
                if (m.done) break;
                if (m.value.kind.case !== "data") continue;
                if (!socket.write(m.value.kind.value)) await new Promise((resolve) => socket.once("drain", resolve));
              }
            } catch {
              // The caller went away.
            }
            socket.end();
          })();
          try {
            for await (const chunk of socket as AsyncIterable<Buffer>) yield create(OpenAdbStreamResponseSchema, { kind: { case: "data", value: chunk } });
          } finally {
            socket.destroy();
          }
        },
        // One tunnel per page, whatever is asked (a server may send fewer): a client must follow next_page_token.
        listTunnels(req) {
          const all = [...tunnels.values()];
          const at = Number(req.pageToken || "0");
          return { tunnels: all.slice(at, at + 1), nextPageToken: at + 1 < all.length ? String(at + 1) : "" };
        },
        closeTunnel(req) {
          const close = closers.get(req.tunnelId);
          if (!close) throw farmError(Errors.TUNNEL_NOT_FOUND, `no open tunnel ${req.tunnelId}`, "tunnel_id");
          close(farmError(Errors.TUNNEL_CLOSED, "closed by its owner"));
          return {};
        },
      });
    },
  });
  const { url, stop } = await listenH2(handler);
  return {
    url,
    tunnels,
    leaseHeaders,
    waitingStreamCalls: () => waiting,
    close: (tunnelId, err) => closers.get(tunnelId)?.(err),
    stop,
  };
}
