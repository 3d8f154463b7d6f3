import type { PullEvidenceResponse } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import type { TransferMeter } from "../progress/progress.js";

/** A bundle's stream with each file chunk's bytes counted as it passes. */
export async function* meteredPull(stream: AsyncIterable<PullEvidenceResponse>, meter: TransferMeter): AsyncGenerator<PullEvidenceResponse> {
  for await (const msg of stream) {
    if (msg.kind.case === "chunk") meter.add(msg.kind.value.length);
    yield msg;
  }
}
