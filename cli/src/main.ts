#!/usr/bin/env node
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { runAsProcess } from "./cli-main.js";

/**
 * `node cli/dist/main.js`, and the bundle's lib/main.js (the whole CLI, ES
 * modules in chunks). The CLI itself is cli-main.ts: a module without
 * top-level await, so the hot bundle (hot/hot-entry.ts, CommonJS) can
 * include it too.
 */
export { main, runAsProcess, type MainOptions } from "./cli-main.js";

// `node cli/dist/main.js`; the installed bundle starts at entry.ts instead.
const invokedDirectly = process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url);
if (invokedDirectly) await runAsProcess();
