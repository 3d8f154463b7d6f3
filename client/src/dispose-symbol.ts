/**
 * Node 20 has no Symbol.asyncDispose (`await using` arrived in Node 24):
 * it is set here, before any class of the library defines its dispose
 * method, to the registered symbol that TypeScript's and esbuild's
 * downlevelled `await using` (vitest's transform included) look up when the
 * runtime has none. On a runtime that has it, nothing changes.
 */
const symbols = Symbol as { asyncDispose?: symbol; dispose?: symbol };
symbols.asyncDispose ??= Symbol.for("Symbol.asyncDispose");
symbols.dispose ??= Symbol.for("Symbol.dispose");

/** The symbol `await using` calls at the end of a scope (the runtime's own, or the one set above). */
export const asyncDispose: typeof Symbol.asyncDispose = Symbol.asyncDispose;
