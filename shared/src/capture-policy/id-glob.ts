import picomatch from "picomatch";

/** Stands in for "/" on both sides, so picomatch has no path separator to stop at. */
const SLASH = "\uE000";

/**
 * A matcher for `idMatches`. Resource ids are names, not paths
 * (`com.example.app:id/checkout_button`), so `*` and `?` also match `:` and
 * `/`: `*checkout*` matches that id, as does `*:id/checkout*`. Otherwise
 * picomatch's syntax: braces (`*:id/{pay,checkout}*`), classes, `\*` for a
 * literal star, a leading `!` to negate; case-sensitive. An empty id (a tap
 * at coordinates) never matches, whatever the glob.
 */
export function idMatcher(glob: string): (id: string) => boolean {
  // The bare regex: picomatch's matcher function does more per call than explain can afford per step.
  const re = picomatch.makeRe(glob.replaceAll("/", SLASH), { dot: true });
  return (id) => id !== "" && re.test(mapped(id));
}

// Every glob rule tests the same step's id in turn: map it once.
let lastId = "";
let lastMapped = "";
function mapped(id: string): string {
  if (id !== lastId) {
    lastId = id;
    lastMapped = id.replaceAll("/", SLASH);
  }
  return lastMapped;
}
