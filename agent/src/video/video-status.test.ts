import { describe, expect, it } from "vitest";
import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import type { RecoveryState, WorkerState } from "./video-session-files.js";
import { videoStatus } from "./video-status.js";

function rec(state: WorkerState, recoveryState: RecoveryState = "none", recoveryReason: string | null = null) {
  return { sessionId: "vs-1", state, recoveryState, recoveryReason };
}

// Only the fields the status reads; the rest of a manifest does not matter here.
function manifest(status: EvidenceManifest["status"], finishedAt: string | null, errors: EvidenceManifest["errors"] = []): EvidenceManifest {
  return { status, finishedAt, errors } as Partial<EvidenceManifest> as EvidenceManifest;
}

describe("videoStatus", () => {
  it("reports a live worker's state, with a terminal worker still finalizing", () => {
    expect(videoStatus(rec("starting"), null, true, {})).toEqual({ status: "starting", code: "", message: "" });
    expect(videoStatus(rec("recording"), manifest("failed", null), true, {})).toEqual({ status: "recording", code: "", message: "" });
    expect(videoStatus(rec("terminal"), null, true, {})).toEqual({ status: "finalizing", code: "", message: "" });
  });

  it("takes a published manifest's status over the worker's, complete without a code", () => {
    expect(videoStatus(rec("terminal"), manifest("complete", "2025-01-01T00:00:00Z"), false, {})).toEqual({ status: "complete", code: "", message: "" });
    expect(videoStatus(rec("recording"), manifest("complete", "2025-01-01T00:00:00Z"), true, {})).toMatchObject({ status: "complete", code: "" });
  });

  it("names each error of a published partial or failed manifest", () => {
    const m = manifest("partial", "2025-01-01T00:00:00Z", [
      { code: "VIDEO_PULL_FAILED", stage: "pull", message: "cut", component: "adb" },
      { code: "METADATA_UNAVAILABLE", stage: "metadata", message: "x", component: null },
    ]);
    expect(videoStatus(rec("terminal"), m, false, {})).toEqual({ status: "partial", code: "EVIDENCE_CAPTURE_FAILED", message: "pull: VIDEO_PULL_FAILED, metadata: METADATA_UNAVAILABLE" });
  });

  it("says recovery is required for a published session whose recorder may still run", () => {
    const m = manifest("partial", "2025-01-01T00:00:00Z");
    expect(videoStatus(rec("terminal", "recovery_required", "recorder still running"), m, false, {})).toEqual({
      status: "partial",
      code: "EVIDENCE_RECOVERY_REQUIRED",
      message: "recorder still running",
    });
  });

  it("fails a session whose worker died before publishing: recovery required, or a capture failure once released", () => {
    const gone = videoStatus(rec("recording"), manifest("failed", null), false, {});
    expect(gone).toMatchObject({ status: "failed", code: "EVIDENCE_RECOVERY_REQUIRED" });
    expect(gone.message).toContain("farm evidence video inspect --session vs-1");
    expect(videoStatus(rec("recording", "released", "released by alice: phone replaced"), null, false, {})).toEqual({
      status: "failed",
      code: "EVIDENCE_CAPTURE_FAILED",
      message: "the worker died before finishing; released by alice: phone replaced",
    });
  });

  it("keeps the code and message the caller already has", () => {
    const extra = { code: "COMMAND_TIMEOUT", message: "not final within 15 s" };
    expect(videoStatus(rec("finalizing"), null, true, extra)).toEqual({ status: "finalizing", ...extra });
    expect(videoStatus(rec("recording"), null, false, extra)).toEqual({ status: "failed", ...extra });
    expect(videoStatus(rec("terminal"), manifest("failed", "2025-01-01T00:00:00Z"), false, extra)).toEqual({ status: "failed", ...extra });
  });
});
