import { describe, expect, it } from "vitest";
import { bannerFromProps, featuresForSdk, formatBanner, parseGetprop } from "./adb-banner.js";

describe("the CNXN banner", () => {
  it("is built from getprop output, with the features the phone's API level guarantees", () => {
    const props = parseGetprop("[ro.product.name]: [panther]\r\n[ro.product.model]: [Pixel 7]\n[ro.product.device]: [panther]\n[ro.build.version.sdk]: [34]\n[multi.line]: [a\nb]\n");
    expect(props.get("ro.product.model")).toBe("Pixel 7");
    expect(props.get("multi.line")).toBe("a");
    expect(formatBanner(bannerFromProps(props))).toBe("device::ro.product.name=panther;ro.product.model=Pixel 7;ro.product.device=panther;features=shell_v2,stat_v2,ls_v2,fixed_push_mkdir");
  });

  it("advertises nothing a phone of that level may lack", () => {
    expect(featuresForSdk(23)).toEqual([]);
    expect(featuresForSdk(26)).toEqual(["shell_v2"]);
    expect(bannerFromProps(new Map()).features).toEqual([]);
  });

  it("keeps values from breaking the host's parse", () => {
    expect(formatBanner({ productName: "a:b", model: "x;y=z", device: "d,e", features: [] })).toBe("device::ro.product.name=a_b;ro.product.model=x_y_z;ro.product.device=d_e;features=");
  });
});
