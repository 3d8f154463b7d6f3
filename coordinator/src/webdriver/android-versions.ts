// Android release → API levels, for `appium:platformVersion` (farm's lease
// selector knows API levels, test authors write "13" or "12.1").
const apiLevels: ReadonlyArray<readonly [string, number, number]> = [
  ["5", 21, 22],
  ["5.0", 21, 21],
  ["5.1", 22, 22],
  ["6", 23, 23],
  ["7", 24, 25],
  ["7.0", 24, 24],
  ["7.1", 25, 25],
  ["8", 26, 27],
  ["8.0", 26, 26],
  ["8.1", 27, 27],
  ["9", 28, 28],
  ["10", 29, 29],
  ["11", 30, 30],
  ["12", 31, 32],
  ["12.0", 31, 31],
  ["12.1", 32, 32],
  ["13", 33, 33],
  ["14", 34, 34],
  ["15", 35, 35],
  ["16", 36, 36],
];

/** The API levels of an Android release ("13" → 33..33, "12" → 31..32); undefined for one farm does not know. */
export function apiLevelsOf(version: string): { min: number; max: number } | undefined {
  const v = version.trim();
  // "8.0" names one level (26), "8" the release (26..27); "13.0.0" is "13".
  const hit = apiLevels.find(([name]) => name === v) ?? apiLevels.find(([name]) => name === v.replace(/(\.0)+$/, ""));
  return hit ? { min: hit[1], max: hit[2] } : undefined;
}
