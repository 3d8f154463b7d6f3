import { MAX_PAYLOAD_V1 } from "./constants.js";

/** Connection states a device may announce in its banner. */
export type BannerType = "device" | "recovery" | "sideload" | "bootloader" | "rescue";

export interface BannerFields {
  type?: BannerType;
  productName: string;
  model: string;
  device: string;
  features: readonly string[];
}

// The host splits the banner on ':' and ';' and '=' (features on ','), so
// these characters inside a value would corrupt the parse.
function clean(value: string): string {
  return value.replace(/[:;=,\0]/g, "_");
}

/**
 * The CNXN payload adbd sends, e.g.
 * `device::ro.product.name=panther;ro.product.model=Pixel 7;ro.product.device=panther;features=shell_v2`.
 * No trailing NUL: it would end up in the last value.
 */
export function formatBanner(fields: BannerFields): string {
  const props = [
    `ro.product.name=${clean(fields.productName)}`,
    `ro.product.model=${clean(fields.model)}`,
    `ro.product.device=${clean(fields.device)}`,
    `features=${fields.features.map(clean).join(",")}`,
  ];
  const banner = `${fields.type ?? "device"}::${props.join(";")}`;
  if (Buffer.byteLength(banner) >= MAX_PAYLOAD_V1) throw new RangeError("adb banner must stay below 4096 bytes");
  return banner;
}

export interface ParsedBanner {
  type: string;
  props: Record<string, string>;
  features: string[];
}

/** Parses a CNXN banner (host's `host::features=…` or a device's). */
export function parseBanner(banner: string): ParsedBanner {
  const text = banner.replace(/\0+$/, "");
  const [type = "", , ...rest] = text.split(":");
  const props: Record<string, string> = {};
  for (const item of rest.join(":").split(";")) {
    if (!item) continue;
    const eq = item.indexOf("=");
    if (eq < 0) continue;
    props[item.slice(0, eq)] = item.slice(eq + 1);
  }
  const features = props["features"] ? props["features"].split(",").filter(Boolean) : [];
  return { type, props, features };
}
