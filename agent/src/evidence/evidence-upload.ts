import { createHash } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import { Errors, farmError } from "@farm/shared/errors";
import { readChunks, sha256File } from "@farm/shared/verified-file";
import { AgentEvidenceService, UploadEvidenceRequestSchema, UploadEvidenceStartSchema, type UploadEvidenceRequest } from "@farm/shared/gen/farm/v1/agent_evidence_service_pb";
import { EvidenceFileHeaderSchema } from "@farm/shared/gen/farm/v1/evidence_pb";

export interface UploadSpec {
  evidenceId: string;
  agentId: string;
  serial: string;
  physicalId: string;
  kind: "still" | "video";
  dir: string;
  files: string[];
}

/**
 * Uploads a staged bundle to the coordinator's store: each file announced
 * with its size and sha256, then its bytes; the manifest last. Memory stays
 * bounded by one chunk per file in flight. The bundle counts as uploaded
 * only when the store's manifest is this one (same sha256): a bundle stored
 * earlier under the same id by someone else is an error, and the caller
 * keeps its staged copy.
 */
export async function uploadBundle(transport: Transport, spec: UploadSpec, signal?: AbortSignal, idleMs = UPLOAD_IDLE_MS): Promise<{ totalBytes: number }> {
  const manifestText = await readFile(join(spec.dir, "manifest.json"), "utf8");
  const manifestSha256 = createHash("sha256").update(manifestText).digest("hex");
  const client = createClient(AgentEvidenceService, transport);
  // A coordinator that stops taking the upload (stalled, or a link that drops
  // packets without a reset) would hold it, and the bundle's retries, forever.
  const idle = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const progressed = () => {
    clearTimeout(timer);
    timer = setTimeout(() => idle.abort(), idleMs);
  };
  progressed();
  let res;
  try {
    res = await client.uploadEvidence(taken(messages(spec, manifestText, manifestSha256), progressed), { signal: signal ? AbortSignal.any([signal, idle.signal]) : idle.signal });
  } catch (err) {
    if (idle.signal.aborted && !signal?.aborted) {
      throw farmError(Errors.EVIDENCE_TRANSFER_FAILED, `evidence ${spec.evidenceId}: the coordinator took nothing more of the upload for ${idleMs} ms; it stays staged and is sent again`);
    }
    throw err;
  } finally {
    clearTimeout(timer);
  }
  if (res.manifestSha256 !== manifestSha256) {
    throw farmError(
      Errors.ALREADY_EXISTS,
      `evidence ${spec.evidenceId}: the coordinator's store holds a manifest with sha256 ${res.manifestSha256 || "(none given)"}, not this agent's ${manifestSha256}; the staged copy is kept`,
      "manifest_json",
    );
  }
  return { totalBytes: Number(res.totalBytes) };
}

/** An upload that makes no progress (no message taken, or no answer after the last) for this long is given up. */
export const UPLOAD_IDLE_MS = 30_000;

/** Passes the messages on, telling `progressed` each time the transport takes one, and once all are taken. */
async function* taken<T>(source: AsyncIterable<T>, progressed: () => void): AsyncGenerator<T> {
  for await (const m of source) {
    yield m;
    progressed();
  }
}

async function* messages(spec: UploadSpec, manifestText: string, manifestSha256: string): AsyncGenerator<UploadEvidenceRequest> {
  const msg = (kind: UploadEvidenceRequest["kind"]) => create(UploadEvidenceRequestSchema, { kind });
  yield msg({
    case: "start",
    value: create(UploadEvidenceStartSchema, { evidenceId: spec.evidenceId, agentId: spec.agentId, serial: spec.serial, physicalId: spec.physicalId, kind: spec.kind, manifestSha256 }),
  });
  for (const path of spec.files) {
    const file = join(spec.dir, path);
    const { size } = await stat(file);
    const sha256 = await sha256File(file);
    yield msg({ case: "file", value: create(EvidenceFileHeaderSchema, { path, size: BigInt(size), sha256 }) });
    // Read as sent: memory stays at one chunk per file in flight.
    for await (const chunk of readChunks(file)) yield msg({ case: "chunk", value: chunk });
  }
  // The manifest as hashed above, so what the store checks is what was announced.
  yield msg({ case: "manifestJson", value: manifestText });
}
