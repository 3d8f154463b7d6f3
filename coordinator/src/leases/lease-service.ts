import type { ConnectRouter, HandlerContext } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import {
  LeaseService,
  AcquireLeaseResponseSchema,
  ListLeasesResponseSchema,
  ReleaseLeaseResponseSchema,
  RenewLeaseResponseSchema,
  RemoveDeviceLabelResponseSchema,
  SetDeviceLabelsResponseSchema,
  ListDeviceLabelsResponseSchema,
} from "@farm/shared/gen/farm/v1/lease_service_pb";
import type { Lease, LeaseSelector } from "@farm/shared/gen/farm/v1/lease_pb";
import { leaseMessage, waiterMessage } from "../watch/messages.js";
import { invalidArgument } from "@farm/shared/errors";
import { requirePrincipal } from "../auth/auth.js";
import { DEFAULT_TTL_MS, type LeaseManager } from "./lease-manager.js";
import type { LeaseRow } from "./lease-store.js";
import type { Selector } from "./selector.js";
import type { Registry } from "../registry/registry.js";

export function registerLeaseService(router: ConnectRouter, deps: { leases: LeaseManager; registry: Registry }): void {
  const toLease = (row: LeaseRow): Lease => leaseMessage(row, deps.registry.agentName(row.agentId) ?? "");

  router.service(LeaseService, {
    async acquireLease(req, ctx: HandlerContext) {
      const principal = requirePrincipal(ctx);
      const { lease, token } = await deps.leases.acquire(principal.tokenName, toSelector(req.selector), {
        waitMs: req.waitMs,
        ttlMs: req.ttlMs || DEFAULT_TTL_MS,
        ticket: req.ticket,
        signal: ctx.signal,
      });
      return create(AcquireLeaseResponseSchema, { lease: toLease(lease), token });
    },
    // The lease token names the lease; the caller's own token must be its holder's (or an admin's).
    async renewLease(req, ctx) {
      if (!req.token) throw invalidArgument("lease", "a lease token is required");
      const p = requirePrincipal(ctx);
      return create(RenewLeaseResponseSchema, { lease: toLease(await deps.leases.renew(req.token, req.ttlMs, { tokenName: p.tokenName, admin: p.admin })) });
    },
    async releaseLease(req, ctx) {
      if (!req.token) throw invalidArgument("lease", "a lease token is required");
      const p = requirePrincipal(ctx);
      return create(ReleaseLeaseResponseSchema, { lease: toLease(await deps.leases.release(req.token, { tokenName: p.tokenName, admin: p.admin })) });
    },
    listLeases(req) {
      const { leases, queue } = deps.leases.listPage(req);
      return create(ListLeasesResponseSchema, {
        leases: leases.items.map(toLease),
        queue: queue.map(waiterMessage),
        nextPageToken: leases.nextPageToken,
      });
    },
    async setDeviceLabels(req, ctx) {
      if (Object.keys(req.labels).length === 0) throw invalidArgument("label", "give at least one key=value");
      return create(SetDeviceLabelsResponseSchema, await deps.leases.setLabels(req.serial, req.labels, caller(ctx)));
    },
    async removeDeviceLabel(req, ctx) {
      return create(RemoveDeviceLabelResponseSchema, await deps.leases.removeLabel(req.serial, req.key, caller(ctx)));
    },
    listDeviceLabels(req) {
      const page = deps.leases.labelsPage(req);
      return create(ListDeviceLabelsResponseSchema, { devices: page.items, nextPageToken: page.nextPageToken });
    },
  });
}

/** Who changes a label, for the holder rule: the lease holder (by name or lease token) or an admin. */
function caller(ctx: HandlerContext): { tokenName: string; admin: boolean; leaseToken: string | null } {
  const p = requirePrincipal(ctx);
  return { tokenName: p.tokenName, admin: p.admin, leaseToken: ctx.requestHeader.get("x-farm-lease") };
}

function toSelector(s: LeaseSelector | undefined): Selector {
  return {
    serial: s?.serial ?? "",
    physicalId: s?.physicalId ?? "",
    labels: { ...(s?.labels ?? {}) },
    model: s?.model ?? "",
    apiLevelMin: s?.apiLevelMin ?? 0,
    apiLevelMax: s?.apiLevelMax ?? 0,
    agent: s?.agent ?? "",
  };
}
