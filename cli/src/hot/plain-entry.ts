/**
 * lib/one.cjs's entry (scripts/bundle-cli.mjs): the plain runner alone
 * (plain-run.ts). It has no import() at all; the build fails if it gets one.
 */
export { runPlain } from "./plain-run.js";
