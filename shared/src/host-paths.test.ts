import { describe, expect, it } from "vitest";
import { withoutHostPaths } from "./host-paths.js";

describe("withoutHostPaths", () => {
  it("turns paths under a root into names relative to it", () => {
    expect(withoutHostPaths("staged copy stays in /var/lib/farm/agent/staging/ev-1; retry", ["/var/lib/farm/agent"])).toBe("staged copy stays in staging/ev-1; retry");
    expect(withoutHostPaths("data dir /var/lib/farm/agent is busy", ["/var/lib/farm/agent"])).toBe("data dir . is busy");
  });

  it("keeps device paths that merely contain a root's name", () => {
    expect(withoutHostPaths("cat /data/local/tmp/x.xml failed", ["/tmp"])).toBe("cat /data/local/tmp/x.xml failed");
  });

  it("reduces quoted file-system paths to their last component", () => {
    expect(withoutHostPaths("ENOSPC: no space left on device, open '/srv/farm/blobs/1234.part'")).toBe("ENOSPC: no space left on device, open '1234.part'");
  });
});
