import { Errors } from "@farm/shared/errors";
import type { AdbClient, AdbServerAddress } from "../adb/adb-client.js";
import { shellV2 } from "../adb/adb-shell.js";
import { shQuote } from "../actions/shell-quote.js";
import { DispatchFailure, type ActionKind } from "../ownership/device-ownership.js";

/** A setting as the lease found it ("null": it was not set). */
export interface BaselineSetting {
  namespace: string;
  key: string;
  value: string;
}

/** What a cleanup diffs against: the phone as its lease found it. */
export interface Baseline {
  packages: string[];
  paths: string[];
  /** Put back when the lease changed them; absent in a baseline read before they were kept. */
  settings?: BaselineSetting[];
}

/**
 * Settings read at grant and put back at lease end when changed: the
 * screen's rotation (the dashboard's Rotate turns auto-rotate off and sets
 * a rotation). user_rotation first, so turning auto-rotate back on is last.
 */
export const RESTORED_SETTINGS: readonly { namespace: string; key: string }[] = [
  { namespace: "system", key: "user_rotation" },
  { namespace: "system", key: "accelerometer_rotation" },
];

/** The policy as it travels from the coordinator (CleanupPolicy in the schema). */
export interface CleanupPlan {
  uninstallInstalled: boolean;
  keepPackages: string[];
  clearData: string[];
  removeNewFilesUnder: string[];
  settings: { namespace: string; key: string; value: string }[];
  airplaneModeOff: boolean;
  pressHome: boolean;
}

export interface CleanRequest {
  leaseId: string;
  plan: CleanupPlan;
  baseline: Baseline;
}

export interface StepOutcome {
  action: string;
  target: string;
  ok: boolean;
  error: string;
}

/** Entries walked under the policy's directories, all together: past it the baseline (or the diff) is refused, not guessed. */
export const MAX_TRACKED_PATHS = 5_000;
export const MAX_TRACKED_PACKAGES = 5_000;

/** Third-party packages installed now (`pm list packages -3`). */
export async function thirdPartyPackages(adb: AdbServerAddress, serial: string, signal: AbortSignal): Promise<string[]> {
  const r = await shellV2(adb, serial, "pm list packages -3", signal);
  if (r.exitCode !== 0) throw new Error(`pm list packages -3 exited ${r.exitCode}: ${r.stderr.toString("utf8").trim()}`);
  const names = r.stdout
    .toString("utf8")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.startsWith("package:"))
    .map((l) => l.slice("package:".length));
  if (names.length > MAX_TRACKED_PACKAGES) throw new Error(`more than ${MAX_TRACKED_PACKAGES} third-party packages: too many to track`);
  return names.sort();
}

/**
 * Every entry under the directories (files and directories, recursively),
 * read over adb sync (names exactly as stored, whatever characters they
 * hold). A directory that does not exist contributes nothing.
 */
export async function entriesUnder(client: AdbClient, serial: string, dirs: readonly string[], signal: AbortSignal): Promise<string[]> {
  const device = client.getDevice(serial);
  const out: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    if (signal.aborted) throw new Error("the deadline passed while reading the phone's files");
    const entries = await device.readdir(dir);
    for (const e of entries) {
      if (e.name === "." || e.name === "..") continue;
      const path = `${dir}/${e.name}`;
      out.push(path);
      if (out.length > MAX_TRACKED_PATHS) throw new Error(`more than ${MAX_TRACKED_PATHS} entries under ${dirs.join(", ")}: too many to track`);
      if (e.isDirectory()) await walk(path);
    }
  };
  for (const d of dirs) await walk(d);
  return out.sort();
}

/** `settings get` of each, in order ("null" for one not set, as `settings` prints it). */
export async function readSettings(adb: AdbServerAddress, serial: string, which: readonly { namespace: string; key: string }[], signal: AbortSignal): Promise<BaselineSetting[]> {
  const out: BaselineSetting[] = [];
  for (const w of which) {
    const r = await shellV2(adb, serial, `settings get ${shQuote(w.namespace)} ${shQuote(w.key)}`, signal);
    if (r.exitCode !== 0) throw new Error(`settings get ${w.namespace} ${w.key} exited ${r.exitCode}: ${r.stderr.toString("utf8").trim()}`);
    out.push({ ...w, value: r.stdout.toString("utf8").trim() });
  }
  return out;
}

/** The baseline a lease's cleanup diffs against. */
export async function readBaseline(adb: AdbServerAddress, client: AdbClient, serial: string, dirs: readonly string[], signal: AbortSignal): Promise<Baseline> {
  return {
    packages: await thirdPartyPackages(adb, serial, signal),
    paths: await entriesUnder(client, serial, dirs, signal),
    settings: await readSettings(adb, serial, RESTORED_SETTINGS, signal),
  };
}

/**
 * The cleanup of a phone whose lease ended, as one journaled action of the
 * farm itself: uninstall what the lease installed (a diff of third-party
 * packages against the baseline, so installs through `farm adb` tunnels
 * count too), clear listed packages' data, remove new entries under listed
 * directories, put back the settings the lease changed (the screen's
 * rotation), put listed settings back, airplane mode off, Home. Every
 * step runs even after one fails; the result lists each. Not proven after a
 * cut: a cleanup whose outcome is unknown stays unknown (the coordinator
 * marks the phone needs-attention).
 */
export function cleanupAction(adb: AdbServerAddress, client: AdbClient): ActionKind<CleanRequest, { steps: StepOutcome[] }> {
  return {
    kind: "cleanup",
    journalRequest: (req) => ({ leaseId: req.leaseId, plan: req.plan, baselinePackages: req.baseline.packages.length, baselinePaths: req.baseline.paths.length, baselineSettings: req.baseline.settings ?? [] }),
    async dispatch(device, req, _action, signal, progress) {
      const serial = device.serial;
      const steps: StepOutcome[] = [];
      progress.phase = "sent";
      const run = async (action: string, target: string, command: string, okWhen: (out: string) => boolean = () => true) => {
        try {
          const r = await shellV2(adb, serial, command, signal);
          const out = r.stdout.toString("utf8").trim();
          const ok = r.exitCode === 0 && okWhen(out);
          steps.push({ action, target, ok, error: ok ? "" : `${command} exited ${r.exitCode}: ${(out + " " + r.stderr.toString("utf8")).trim().slice(0, 300)}` });
        } catch (err) {
          if (signal.aborted) throw new DispatchFailure(`the cleanup did not finish before its deadline (at ${action} ${target})`, true, Errors.COMMAND_TIMEOUT);
          steps.push({ action, target, ok: false, error: (err as Error).message });
        }
      };
      let now: string[] | undefined;
      try {
        now = await thirdPartyPackages(adb, serial, signal);
      } catch (err) {
        if (signal.aborted) throw new DispatchFailure("the cleanup did not finish before its deadline (listing packages)", true, Errors.COMMAND_TIMEOUT);
        steps.push({ action: "list", target: "packages", ok: false, error: (err as Error).message });
      }
      if (now && req.plan.uninstallInstalled) {
        const before = new Set(req.baseline.packages);
        const keep = new Set(req.plan.keepPackages);
        for (const p of now) {
          if (!before.has(p) && !keep.has(p)) await run("uninstall", p, `pm uninstall ${shQuote(p)}`, (out) => out.includes("Success"));
        }
      }
      for (const p of req.plan.clearData) {
        // Only an installed package has data to clear; `pm path` answers whether it is (system packages included).
        const installed = await shellV2(adb, serial, `pm path ${shQuote(p)}`, signal).then((r) => r.exitCode === 0 && r.stdout.length > 0, () => true);
        if (installed) await run("clear-data", p, `pm clear ${shQuote(p)}`, (out) => out.includes("Success"));
      }
      if (req.plan.removeNewFilesUnder.length > 0) {
        try {
          const present = await entriesUnder(client, serial, req.plan.removeNewFilesUnder, signal);
          const before = new Set(req.baseline.paths);
          const removed: string[] = [];
          for (const path of present) {
            if (before.has(path) || removed.some((dir) => path.startsWith(`${dir}/`))) continue;
            await run("remove-file", path, `rm -rf -- ${shQuote(path)}`);
            removed.push(path);
          }
        } catch (err) {
          if (signal.aborted) throw new DispatchFailure("the cleanup did not finish before its deadline (reading files)", true, Errors.COMMAND_TIMEOUT);
          steps.push({ action: "list", target: req.plan.removeNewFilesUnder.join(","), ok: false, error: (err as Error).message });
        }
      }
      if (req.baseline.settings && req.baseline.settings.length > 0) {
        // Only what the lease changed: a setting as it was is left alone.
        let current: BaselineSetting[] | undefined;
        try {
          current = await readSettings(adb, serial, req.baseline.settings, signal);
        } catch (err) {
          if (signal.aborted) throw new DispatchFailure("the cleanup did not finish before its deadline (reading settings)", true, Errors.COMMAND_TIMEOUT);
          steps.push({ action: "list", target: "settings", ok: false, error: (err as Error).message });
        }
        for (const [i, was] of req.baseline.settings.entries()) {
          if (!current || current[i]?.value === was.value) continue;
          const target = `${was.namespace} ${was.key}`;
          if (was.value === "null") await run("restore-setting", target, `settings delete ${shQuote(was.namespace)} ${shQuote(was.key)}`);
          else await run("restore-setting", target, `settings put ${shQuote(was.namespace)} ${shQuote(was.key)} ${shQuote(was.value)}`);
        }
      }
      for (const s of req.plan.settings) await run("setting", `${s.namespace} ${s.key}`, `settings put ${shQuote(s.namespace)} ${shQuote(s.key)} ${shQuote(s.value)}`);
      if (req.plan.airplaneModeOff) {
        await run("airplane-mode-off", "global airplane_mode_on", "settings put global airplane_mode_on 0 && am broadcast -a android.intent.action.AIRPLANE_MODE --ez state false");
      }
      if (req.plan.pressHome) await run("home", "KEYCODE_HOME", "input keyevent KEYCODE_HOME");
      progress.phase = "accepted";
      const failed = steps.filter((s) => !s.ok).length;
      return { result: { steps }, receipt: { provenBy: "each step's exit status", steps: steps.length, failed } };
    },
    // A cleanup cut midway is not proven by anything it left; it stays unknown.
    prove: async () => undefined,
  };
}
