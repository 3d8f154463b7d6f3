import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { cliDoc } from "./cli-doc.js";

const docPath = fileURLToPath(new URL("../../../docs/cli.md", import.meta.url));

describe("docs/cli.md", () => {
  it("is what the command tree generates (rewrite it with `node cli/dist/docs/write-cli-doc.js`)", () => {
    expect(readFileSync(docPath, "utf8")).toBe(cliDoc());
  });

  it("covers every visible command, with JSON examples of a success and a failure", () => {
    const doc = cliDoc();
    for (const c of ["farm device shell", "farm lease acquire", "farm evidence pull", "farm config set", "farm completion bash", "farm session start", "farm session end"]) expect(doc).toContain(`\`${c}\``);
    expect(doc).toContain("{\"ok\":true");
    expect(doc).toContain("{\"ok\":false,\"code\":\"INVALID_ARGUMENT\"");
  });
});
