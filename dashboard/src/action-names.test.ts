import { describe, expect, it } from "vitest";
import { changeOf, isFailure, readableAction } from "./action-names.js";

describe("action names and outcomes on the dashboard", () => {
  it("reads RPC names as words", () => {
    expect(readableAction("sendInput")).toBe("Send input");
    expect(readableAction("captureEvidence")).toBe("Capture evidence");
    expect(readableAction("getUiTree")).toBe("Get ui tree");
    expect(readableAction("reboot")).toBe("Reboot");
  });

  it("does not count a deliberate close as a failure", () => {
    expect(isFailure("TUNNEL_CLOSED")).toBe(false);
    expect(isFailure("ok")).toBe(false);
    expect(isFailure("COMMAND_TIMEOUT")).toBe(true);
  });

  it("calls an element that was not found no change, and an unknown end unknown", () => {
    expect(changeOf("ELEMENT_NOT_FOUND")).toBe("unchanged");
    expect(changeOf("ok")).toBe("changed");
    expect(changeOf("COMMAND_TIMEOUT")).toBe("unknown");
  });
});
