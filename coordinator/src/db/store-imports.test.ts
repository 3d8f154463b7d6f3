import { fileURLToPath } from "node:url";
import { relative } from "node:path";
import { describe, expect, it } from "vitest";
import { parseCircular, parseDependencyTree } from "dpdm";

const root = fileURLToPath(new URL("../../..", import.meta.url));

// A store's interface file (`x-store.ts`) and its implementations (`sqlite-x-store.ts`, `pg-x-store.ts`, `kysely-x-store.ts`).
const IMPLEMENTATION = /\/(sqlite|pg|kysely)-[\w-]+-store\.ts$/;
const INTERFACE = /\/(?!(sqlite|pg|kysely)-)[\w-]+-store\.ts$/;

describe("store wiring (dpdm, type-only imports included)", () => {
  it("leaves interface files importing no implementation and stores in no import cycle: db/stores.ts builds them", { timeout: 120_000 }, async () => {
    const tree = await parseDependencyTree("coordinator/src/**/*.ts", { context: root, cwd: root, transform: false, skipDynamicImports: false, exclude: /node_modules|\.test\.ts$/ });
    const files = Object.keys(tree).map((f) => relative(root, f));
    // The walk did read the stores: a pattern matching nothing would pass the checks below.
    expect(files).toContain("coordinator/src/db/stores.ts");
    expect(files).toContain("coordinator/src/devices/device-label-store.ts");

    const wrong: string[] = [];
    for (const [file, deps] of Object.entries(tree)) {
      if (!INTERFACE.test(file)) continue;
      for (const d of deps ?? []) if (d.id && IMPLEMENTATION.test(d.id)) wrong.push(`${relative(root, file)} -> ${relative(root, d.id)}`);
    }
    expect(wrong).toEqual([]);

    const storeCycles = parseCircular(tree)
      .map((cycle) => cycle.map((f) => relative(root, f)))
      .filter((cycle) => cycle.some((f) => /-store\.ts$|\/db\//.test(f)));
    expect(storeCycles).toEqual([]);
  });
});
