/** What `make demo` prints for a newcomer to try: `farm …` commands, never `node …/main.js`. */
export interface DemoInfo {
  /** The demo's own FARM_HOME (a fresh temp dir per run). */
  home: string;
  /** The built CLI (cli/dist/main.js), for the alias line when `farm` is not installed. */
  farmBin: string;
  url: string;
  serials: string[];
  adbPort: number;
}

export function demoCommands(info: DemoInfo): string[] {
  const first = info.serials[0] ?? "SERIAL";
  return [
    "Try, in another shell:",
    `  export FARM_HOME=${info.home}`,
    // `farm` below is this checkout's CLI; `make install` puts it on PATH instead.
    `  alias farm='node ${info.farmBin}'   # or: make install`,
    "  farm devices --output pretty",
    "  farm agents --output pretty",
    "  farm token list --output pretty",
    `  curl ${info.url}/healthz`,
    // A path inside the run's own home: a second run never meets an old bundle.
    `  farm evidence capture --device ${first} ${info.home}/bundle`,
    "",
    `Dashboard: ${info.url}/dashboard/ (sign in with the admin token in ${info.home}/admin.token)`,
    "",
    `Simulated phones: ${info.serials.join(", ")} on the adb server at port ${info.adbPort}`,
    `  ANDROID_ADB_SERVER_PORT=${info.adbPort} adb devices -l`,
    "",
    `Ctrl-C stops everything and removes ${info.home}.`,
  ];
}
