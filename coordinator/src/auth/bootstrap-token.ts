import { readFile } from "node:fs/promises";
import { writePrivateFile } from "@farm/shared/secure-file";
import type { Role, TokenKind, TokenStore } from "./token-store.js";

/**
 * Makes sure `file` holds a valid token of this kind, creating one (named
 * `baseName`, or `baseName-2`, ... if that name is taken) when the file is
 * missing or its token is unknown or revoked. The file is 0600.
 */
export async function ensureTokenFile(
  store: TokenStore,
  file: string,
  spec: { baseName: string; kind: TokenKind; role: Role | null },
): Promise<{ created: boolean; name: string }> {
  const existing = await readFile(file, "utf8").then(
    (t) => t.trim(),
    () => "",
  );
  if (existing !== "") {
    const p = await store.authenticate(existing);
    if (typeof p === "object" && p.kind === spec.kind && p.role === spec.role) {
      return { created: false, name: p.tokenName };
    }
  }
  const taken = new Set((await store.list()).map((t) => t.name));
  let name = spec.baseName;
  for (let i = 2; taken.has(name); i++) name = `${spec.baseName}-${i}`;
  const { secret } = await store.create(name, spec.kind, spec.role);
  await writePrivateFile(file, secret + "\n");
  return { created: true, name };
}
