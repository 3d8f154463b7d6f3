import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { GetOwnershipResponseSchema, type GetOwnershipResponse } from "@farm/shared/gen/farm/v1/device_service_pb";
import { withPreEncodedField } from "@farm/shared/pre-encoded";
import type { Principal } from "../auth/token-store.js";
import { maySeeCommand } from "./command-privacy.js";

/** Journal kinds whose request may hold a secret (command-privacy.ts redacts them for other viewers). */
const PRIVATE_KINDS = new Set(["shell", "setprop", "input"]);

// Field numbers of farm.v1 messages read here (device_service.proto).
const RESPONSE_OWNERSHIP = 1;
const OWNERSHIP_UNRESOLVED = 6;
const OWNERSHIP_RECENT = 7;
const RECORD_KIND = 4;
const RECORD_REQUESTED_BY = 19;

/**
 * An agent's GetOwnership answer as the agent encoded it, when this viewer
 * may read every journal record in it as it is (an admin, or records that
 * are the viewer's own or hold no request text): the coordinator then skips
 * decoding, copying and re-encoding about 10 KB of records (20 recent
 * entries), which made a read cost nearly what a routed shell does.
 * Undefined when any record must be redacted for this viewer, or the bytes
 * are not the plain shape expected: the caller then decodes and applies the
 * view as before. Binary protobuf only (pre-encoded.ts).
 */
export function ownershipAsIs(response: Uint8Array, viewer: Principal): GetOwnershipResponse | undefined {
  let ownership: Uint8Array | undefined;
  try {
    const r = new BinaryReader(response);
    while (r.pos < r.len) {
      const [no, wt] = r.tag();
      // One ownership field and nothing else; anything more is left to the full decode.
      if (no !== RESPONSE_OWNERSHIP || wt !== WireType.LengthDelimited || ownership) return undefined;
      ownership = r.bytes();
    }
    if (!ownership) return undefined;
    if (!viewer.admin && !recordsVisible(ownership, viewer)) return undefined;
  } catch {
    return undefined; // malformed: the full decode reports it
  }
  return withPreEncodedField(GetOwnershipResponseSchema, RESPONSE_OWNERSHIP, [ownership]);
}

/** True when every record of an encoded Ownership reads the same to this viewer as to its requester. */
function recordsVisible(ownership: Uint8Array, viewer: Principal): boolean {
  const r = new BinaryReader(ownership);
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if ((no === OWNERSHIP_UNRESOLVED || no === OWNERSHIP_RECENT) && wt === WireType.LengthDelimited) {
      if (!recordVisible(r.bytes(), viewer)) return false;
    } else {
      r.skip(wt, no);
    }
  }
  return true;
}

function recordVisible(record: Uint8Array, viewer: Principal): boolean {
  const r = new BinaryReader(record);
  let kind = "";
  let requestedBy = "";
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (no === RECORD_KIND && wt === WireType.LengthDelimited) kind = r.string();
    else if (no === RECORD_REQUESTED_BY && wt === WireType.LengthDelimited) requestedBy = r.string();
    else r.skip(wt, no);
  }
  return !PRIVATE_KINDS.has(kind) || maySeeCommand(viewer, requestedBy);
}
