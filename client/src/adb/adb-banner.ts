import type { Duplex } from "node:stream";
import { MAX_PAYLOAD_V1 } from "./adb-packet.js";

/** What the local adb server learns about the remote phone from our CNXN. */
export interface DeviceBanner {
  productName: string;
  model: string;
  device: string;
  /** adb features the phone's adbd implements; the host uses one only if both sides list it. */
  features: readonly string[];
}

/** A banner for a phone we know nothing about: plain v1 services only. */
export const UNKNOWN_DEVICE: DeviceBanner = { productName: "farm", model: "farm_remote", device: "farm", features: [] };

// The host splits the banner on ':' ';' '=' (features on ','), so these would corrupt it.
const clean = (value: string) => value.replace(/[:;=,\0]/g, "_");

/**
 * The CNXN payload adbd sends: `device::ro.product.name=X;ro.product.model=Y;ro.product.device=Z;features=a,b`.
 * No trailing NUL: the host would keep it in the last value.
 */
export function formatBanner(b: DeviceBanner): string {
  const banner = `device::ro.product.name=${clean(b.productName)};ro.product.model=${clean(b.model)};ro.product.device=${clean(b.device)};features=${b.features.map(clean).join(",")}`;
  // Old hosts read at most 4 KiB of CNXN payload; values this long are not real anyway.
  return Buffer.byteLength(banner) < MAX_PAYLOAD_V1 ? banner : formatBanner({ ...b, productName: b.productName.slice(0, 64), model: b.model.slice(0, 64), device: b.device.slice(0, 64) });
}

/** `getprop` output (`[key]: [value]` lines) as a map; multi-line values keep their first line. */
export function parseGetprop(text: string): Map<string, string> {
  const props = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const m = /^\[([^\]]+)\]: \[(.*)$/.exec(line);
    if (!m) continue;
    const rest = m[2] as string;
    props.set(m[1] as string, rest.endsWith("]") ? rest.slice(0, -1) : rest);
  }
  return props;
}

/**
 * The adb features to advertise for a phone of this API level. The tunnel
 * does not tell us what the phone's adbd announced, and advertising one it
 * lacks breaks the commands that use it (a v2 stat on an adbd without it is
 * a protocol fault), so this lists only features every adbd of that level
 * has, and only those with plain fallbacks when absent: shell_v2 (Android 7:
 * exit codes, separate stderr), stat_v2/ls_v2/fixed_push_mkdir (Android 9).
 * Left out: cmd, abb, abb_exec (adb install then pushes and runs pm install,
 * which every phone has).
 */
export function featuresForSdk(sdk: number): string[] {
  const features: string[] = [];
  if (sdk >= 24) features.push("shell_v2");
  if (sdk >= 28) features.push("stat_v2", "ls_v2", "fixed_push_mkdir");
  return features;
}

/** The banner of a phone from its properties. */
export function bannerFromProps(props: ReadonlyMap<string, string>): DeviceBanner {
  const sdk = Number.parseInt(props.get("ro.build.version.sdk") ?? "", 10);
  return {
    productName: props.get("ro.product.name") || UNKNOWN_DEVICE.productName,
    model: props.get("ro.product.model") || UNKNOWN_DEVICE.model,
    device: props.get("ro.product.device") || UNKNOWN_DEVICE.device,
    features: Number.isFinite(sdk) ? featuresForSdk(sdk) : [],
  };
}

/**
 * The phone's banner from its properties, read with `getprop` through one
 * stream; rejects if the stream is refused or takes longer than timeoutMs.
 */
export async function probeBanner(openStream: (service: string) => Promise<Duplex>, timeoutMs: number): Promise<DeviceBanner> {
  const opening = openStream("shell:getprop");
  let stream: Duplex;
  try {
    stream = await withTimeout(opening, timeoutMs, "opening shell:getprop");
  } catch (err) {
    // A stream that opens after all is not left behind.
    opening.then((s) => s.destroy(), () => undefined);
    throw err;
  }
  const chunks: Buffer[] = [];
  const read = (async () => {
    for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk);
  })();
  read.catch(() => undefined);
  try {
    await withTimeout(read, timeoutMs, "reading getprop");
  } finally {
    stream.destroy();
  }
  return bannerFromProps(parseGetprop(Buffer.concat(chunks).toString("utf8")));
}

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, expired]);
  } finally {
    clearTimeout(timer);
  }
}
