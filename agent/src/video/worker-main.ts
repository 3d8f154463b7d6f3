/**
 * Entry point of a detached video worker: `node worker-main.js SESSION_DIR`.
 * Started by the agent; keeps running when the agent or the CLI goes away.
 */
import { runVideoWorker, type WorkerMessage } from "./video-worker.js";

const dir = process.argv[2];
if (!dir) {
  process.stderr.write("usage: worker-main.js SESSION_DIR\n");
  process.exit(2);
}
// The agent listens only during startup; after that, or if it died, messages go nowhere.
const send = (m: WorkerMessage) => {
  if (process.connected) process.send?.(m, undefined, undefined, () => undefined);
};
// A dying agent must not take the worker with it.
process.on("SIGHUP", () => undefined);
process.on("disconnect", () => undefined);
runVideoWorker(dir, send).then(
  () => {
    if (process.connected) process.disconnect();
    process.exit(0);
  },
  (err: unknown) => {
    process.stderr.write(`video worker failed: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
