import { describe, expect, it } from "vitest";
import { refusalReport, toErrorReport } from "@farm/shared/errors";
import { ANDROID_ENDPOINT_SCHEMA, checkAndroidBinding, validateAndroidDescriptor, validatePackageName } from "./android-endpoint.js";

function reportOf(fn: () => unknown) {
  try {
    fn();
  } catch (err) {
    return toErrorReport(err);
  }
  throw new Error("expected a refusal");
}

describe("app endpoint refusals", () => {
  it("are refused before anything reaches the app: the pre-dispatch envelope", () => {
    const good = { schema: ANDROID_ENDPOINT_SCHEMA, packageName: "com.example.app", runtimeEpoch: "e1", transport: "localabstract", socketName: "farm-sdk-e1", version: "1", updatedAtMs: 1, ok: true };
    for (
      const [fn, code] of [
        [() => validatePackageName("not a package"), "bridge_endpoint_invalid"],
        [() => validateAndroidDescriptor("not json", "com.example.app"), "bridge_endpoint_invalid"],
        [() => validateAndroidDescriptor(JSON.stringify({ ...good, packageName: "com.example.other" }), "com.example.app"), "bridge_package_mismatch"],
        [() => validateAndroidDescriptor(JSON.stringify({ ...good, ok: false, error: "starting" }), "com.example.app"), "bridge_not_ready"],
        [() => checkAndroidBinding({ status: 409, body: Buffer.from("{}") }, good), "bridge_identity_mismatch"],
      ] as const
    ) {
      const r = reportOf(fn);
      expect(r).toEqual(refusalReport(code, r.message, r.field));
    }
  });
});
