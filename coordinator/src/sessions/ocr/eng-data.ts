import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/**
 * The directory of the installed @tesseract.js-data/eng package that holds
 * `eng.traineddata.gz`. Resolved through Node's resolver, so it works from
 * src (vitest) and from dist alike, and tesseract.js never downloads it.
 *
 * "4.0.0_best_int" is the LSTM-only model: the one tesseract.js itself picks
 * for the LSTM engine, and a quarter the size of "4.0.0" (which adds the
 * legacy engine we never run), so a worker starts faster and holds less.
 */
export function engDataDir(): string {
  const manifest = createRequire(import.meta.url).resolve("@tesseract.js-data/eng/package.json");
  return join(dirname(manifest), "4.0.0_best_int");
}

/** The package ships the data gzipped: tesseract.js asks for `eng.traineddata.gz`. */
export const ENG_DATA_GZIPPED = true;
