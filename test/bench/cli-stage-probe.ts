/**
 * Loaded into a `farm` process with NODE_OPTIONS=--import (cli-cold-start.ts)
 * to split its wall time into stages without touching the CLI: when this
 * module runs, Node's own start-up is over; the first socket connect is
 * when the CLI, its code loaded and its config resolved, starts its call;
 * the exit event is when it is done. Prints one line on stderr at exit:
 *
 *   farm-stages {"probe":<ms>,"connect":<ms>,"exit":<ms>}
 *
 * (milliseconds since the process started, performance.now()).
 */
import { Socket } from "node:net";
import { performance } from "node:perf_hooks";

const marks: { probe: number; connect?: number; exit?: number } = { probe: performance.now() };
const connect = Socket.prototype.connect;
Socket.prototype.connect = function (this: Socket, ...args: unknown[]) {
  marks.connect ??= performance.now();
  return (connect as (...a: unknown[]) => Socket).apply(this, args);
} as typeof connect;
process.once("exit", () => {
  marks.exit = performance.now();
  process.stderr.write(`farm-stages ${JSON.stringify(marks)}\n`);
});
