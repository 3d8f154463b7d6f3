import { toErrorReport, type ErrorReport } from "../errors.js";

/** For tests: the report of what `f` throws, or null when it does not throw. */
export function refusal(f: () => unknown): ErrorReport | null {
  try {
    f();
    return null;
  } catch (err) {
    return toErrorReport(err);
  }
}
