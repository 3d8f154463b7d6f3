import { describe, expect, it } from "vitest";
import { limitsOf } from "./message-limits.js";

describe("message limits", () => {
  it("lets another replica pass on any device call it received: ReplicaService carries a DeviceService request and more", () => {
    const device = limitsOf("farm.v1.DeviceService").messageMaxBytes;
    expect(limitsOf("farm.v1.ReplicaService").messageMaxBytes).toBeGreaterThan(device);
  });
});
