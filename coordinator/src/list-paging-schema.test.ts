/**
 * Every List* method the schema has pages the same way (AIP-158): its
 * request takes page_size and page_token, its response returns
 * next_page_token. Read from the generated descriptors, so a new List*
 * without paging fails here.
 */
import { readdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { DescService } from "@bufbuild/protobuf";

const genDir = join(dirname(fileURLToPath(import.meta.url)), "../../shared/src/gen/farm/v1");

async function services(): Promise<DescService[]> {
  const out: DescService[] = [];
  for (const file of (await readdir(genDir)).filter((f) => f.endsWith("_pb.ts")).sort()) {
    const mod = (await import(join(genDir, file))) as Record<string, unknown>;
    for (const v of Object.values(mod)) if (typeof v === "object" && v !== null && (v as { kind?: unknown }).kind === "service") out.push(v as DescService);
  }
  return out;
}

describe("List* paging", () => {
  it("every List* method takes page_size and page_token and returns next_page_token", async () => {
    const lists = (await services()).flatMap((s) => s.methods.filter((m) => m.name.startsWith("List")).map((m) => ({ name: `${s.typeName}/${m.name}`, m })));
    // The schema has several: a search that found none would check nothing.
    expect(lists.length).toBeGreaterThan(5);
    const missing = lists.flatMap(({ name, m }) => {
      const field = (fields: { name: string; fieldKind: string; scalar?: number }[], want: string) => fields.some((f) => f.name === want && f.fieldKind === "scalar");
      const gaps = [];
      if (!field(m.input.fields as never, "page_size")) gaps.push("page_size");
      if (!field(m.input.fields as never, "page_token")) gaps.push("page_token");
      if (!field(m.output.fields as never, "next_page_token")) gaps.push("next_page_token");
      return gaps.length ? [`${name}: ${gaps.join(", ")}`] : [];
    });
    expect(missing).toEqual([]);
  });
});
