#!/usr/bin/env node
import { answerLocalVersion } from "./version/fast-version.js";
import { EXIT_CLOSED_PIPE, EXIT_IO_ERROR } from "./stdout-watch.js";
import { loadHotBundle, PLAIN_BUNDLE, type HotBundle, type PlainBundle } from "./hot/hot-bundle.js";
import { namesHotCommand } from "./hot/names-hot-command.js";
import type { Handover } from "./hot/recorded-call.js";

/**
 * The installed `farm` command's entry. The bundle (scripts/bundle-cli.mjs)
 * builds this file alone, as CommonJS (lib/farm.cjs), because Node starts a
 * CommonJS file faster than an ES module: `farm --version`, which scripts
 * call to probe for farm, is answered here for about what `node -e 0`
 * costs. The hot commands (`farm shell`, `farm devices`, …) first try the
 * plain runner (lib/one.cjs: a plain success and nothing else,
 * hot/plain-run.ts), then the hot bundle (lib/hot.cjs, compiled with its V8
 * code cache: hot/hot-bundle.ts), which takes over any run the plain runner
 * hands on; everything else loads the CLI (main.ts) and runs it.
 */
if (answerLocalVersion(process.argv.slice(2), process.env, (s) => void process.stdout.write(s))) {
  // A reader gone already (`farm --version | true`): exit as a closed pipe does, without a stack trace.
  process.stdout.on("error", (err: NodeJS.ErrnoException) => {
    process.exitCode = err.code === "EPIPE" ? EXIT_CLOSED_PIPE : EXIT_IO_ERROR;
  });
} else {
  const argv = process.argv.slice(2);
  // Only ever run as lib/farm.cjs (CommonJS), where __dirname is lib/.
  const dir = typeof __dirname === "string" && namesHotCommand(argv, process.env) ? __dirname : undefined;
  // The plain runner requires Node's built-ins only: this file's own require serves it.
  const plain = dir === undefined ? undefined : loadHotBundle<PlainBundle>(dir, PLAIN_BUNDLE, require);
  const full = (handover?: Handover) => {
    const hot = dir === undefined ? undefined : loadHotBundle<HotBundle>(dir);
    // Either CLI judges a call the plain runner made (recorded-call.ts): the same command in both.
    if (hot?.exports.isHotCommand(argv, process.env)) void hot.exports.runAsProcess(handover);
    else void import("./main.js").then((m) => m.runAsProcess(handover));
  };
  if (plain) void plain.exports.runPlain(argv, process.env).then((handover) => handover && full(handover));
  else full();
}
