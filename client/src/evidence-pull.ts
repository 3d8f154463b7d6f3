import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { EvidenceService, type PullEvidenceResponse } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import type { TransferProgress } from "./blob-files.js";
import { writePulledBundle } from "./bundle-writer.js";
import type { CallScope, Wire } from "./wire.js";

/** Called (and awaited) as a transfer begins: the meter its bytes are counted on, or none. */
export type TransferStart = () => TransferProgress | undefined | Promise<TransferProgress | undefined>;

/** A bundle's stream with each file chunk's bytes counted as it passes (a bundle announces no total). */
async function* metered(stream: AsyncIterable<PullEvidenceResponse>, meter: TransferProgress | undefined): AsyncGenerator<PullEvidenceResponse> {
  for await (const msg of stream) {
    if (meter && msg.kind.case === "chunk") meter.add(msg.kind.value.length);
    yield msg;
  }
}

/**
 * Writes a stored evidence bundle into `dir`, a new directory claimed only
 * when the coordinator starts sending (an unknown id creates nothing), each
 * file checked against the manifest as it arrives (bundle-writer.ts).
 */
export async function pullBundle(
  wire: Wire,
  scope: CallScope,
  evidenceId: string,
  dir: string,
  opts: { timeoutMs?: number | undefined; signal?: AbortSignal | undefined; onDownload?: TransferStart | undefined },
): Promise<EvidenceManifest> {
  const meter = await opts.onDownload?.();
  const stream = wire.client(EvidenceService).pullEvidence({ evidenceId }, wire.options(scope, opts));
  return writePulledBundle({ dir, evidenceId, claim: true }, metered(stream, meter));
}
