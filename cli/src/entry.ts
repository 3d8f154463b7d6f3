#!/usr/bin/env node
import { answerLocalVersion } from "./version/fast-version.js";
import { EXIT_CLOSED_PIPE, EXIT_IO_ERROR } from "./stdout-watch.js";
import { loadHotBundle } from "./hot/hot-bundle.js";
import { namesHotCommand } from "./hot/names-hot-command.js";

/**
 * The installed `farm` command's entry. The bundle (scripts/bundle-cli.mjs)
 * builds this file alone, as CommonJS (lib/farm.cjs), because Node starts a
 * CommonJS file faster than an ES module: `farm --version`, which scripts
 * call to probe for farm, is answered here for about what `node -e 0`
 * costs. The hot commands (`farm shell`, `farm devices`, …) run from the
 * hot bundle beside it (lib/hot.cjs, compiled with its V8 code cache:
 * hot/hot-bundle.ts); everything else loads the CLI (main.ts) and runs it.
 */
if (answerLocalVersion(process.argv.slice(2), process.env, (s) => void process.stdout.write(s))) {
  // A reader gone already (`farm --version | true`): exit as a closed pipe does, without a stack trace.
  process.stdout.on("error", (err: NodeJS.ErrnoException) => {
    process.exitCode = err.code === "EPIPE" ? EXIT_CLOSED_PIPE : EXIT_IO_ERROR;
  });
} else {
  const argv = process.argv.slice(2);
  // Only ever run as lib/farm.cjs (CommonJS), where __dirname is lib/.
  const hot = typeof __dirname === "string" && namesHotCommand(argv, process.env) ? loadHotBundle(__dirname) : undefined;
  if (hot?.exports.isHotCommand(argv, process.env)) void hot.exports.runAsProcess();
  else void import("./main.js").then((m) => m.runAsProcess());
}
