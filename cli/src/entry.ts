#!/usr/bin/env node
import { answerLocalVersion } from "./version/fast-version.js";

/**
 * The installed `farm` command's entry. The bundle (scripts/bundle-cli.mjs)
 * builds this file alone, as CommonJS (lib/farm.cjs), because Node starts a
 * CommonJS file faster than an ES module: `farm --version`, which scripts
 * call to probe for farm, is answered here for about what `node -e 0`
 * costs. Everything else loads the CLI (main.ts) and runs it.
 */
if (!answerLocalVersion(process.argv.slice(2), process.env, (s) => void process.stdout.write(s))) {
  void import("./main.js").then((m) => m.runAsProcess());
}
