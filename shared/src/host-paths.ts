import { basename, resolve } from "node:path";

/**
 * Error text as a client may see it: no host paths. A path under one of
 * `roots` (data dir, lock dir, temp dir) becomes its name relative to that
 * root; a path quoted the way Node's file-system errors quote it ("ENOSPC:
 * no space left on device, open '/var/lib/farm/x.part'") becomes its last
 * component. Logs keep the original text; only what crosses to a client is
 * rewritten.
 */
export function withoutHostPaths(message: string, roots: readonly string[] = []): string {
  let out = message.replace(/'(\/[^'\n]*)'/g, (_m, p: string) => `'${basename(p)}'`);
  const absolute = roots.filter((r) => r.length > 1).map((r) => resolve(r));
  for (const root of absolute.sort((a, b) => b.length - a.length)) {
    // Only where the root starts a path: "/tmp" in "/data/local/tmp/x" is a device path.
    const re = new RegExp(`(?<![\\w./-])${escape(root)}(?:/([^\\s'"]*))?(?![\\w.-])`, "g");
    out = out.replace(re, (_m, rest: string | undefined) => (rest ? rest : "."));
  }
  return out;
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
