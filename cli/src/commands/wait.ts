import { mkdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { ErrorCode } from "@farm/shared/error-codes";
import { Errors } from "@farm/shared/errors";
import { FARM_VERSION } from "@farm/shared/version";
import { CliError } from "../cli-error.js";
import { cliErrorReport } from "../cli-error-report.js";
import { errorLine } from "../output.js";
import { clientSession } from "../session.js";
import type { waitOptions } from "../tree/check-commands.js";
import type { Action } from "../tree/spec.js";
import { openSessionRecorder, recordStep, takeStepShot, type Recorded, type StepFile, type StepShot } from "../visual/session-step.js";
import { diagnosisSummary, flatten, matchingElements, plainElement, PollTrace, selectorJson, selectorText, waitDiagnosis, type WaitSelector, type WaitSettings } from "../visual/wait-diagnosis.js";
import { asCli, deviceTarget } from "./device-target.js";
import { libraryClient } from "./library-client.js";

const USAGE = "farm wait --id RESOURCE_ID | --text TEXT | --desc CONTENT_DESC [--gone]";

/** The shortest deadline a poll gets: a poll started just before --timeout may end up to this much after it. */
const MIN_POLL_MS = 1_000;

/** Deadline of the calls around the polls (the session check, the step's uploads): --timeout is the wait's. */
const CALL_TIMEOUT_MS = 30_000;

/**
 * Poll errors that waiting cannot cure: the wait stops at once with that
 * error. Everything else (UI_TREE_FAILED on a locked screen, a device
 * briefly offline, a poll's own deadline) is noted and polling goes on.
 */
const FATAL = new Set<string>([
  Errors.INVALID_ARGUMENT.code,
  Errors.UNAUTHENTICATED.code,
  Errors.PERMISSION_DENIED.code,
  Errors.METHOD_NOT_ALLOWED.code,
  Errors.NOT_IMPLEMENTED.code,
  Errors.INSECURE_TRANSPORT.code,
  Errors.TLS_VERIFY_FAILED.code,
  Errors.LEASE_REQUIRED.code,
  Errors.LEASE_HELD_BY_OTHER.code,
  Errors.LEASE_EXPIRED.code,
  Errors.LEASE_RELEASED.code,
  Errors.LEASE_NOT_FOUND.code,
  Errors.DEVICE_NOT_FOUND.code,
  Errors.DEVICE_AMBIGUOUS.code,
]);

/** --id, --text or --desc: exactly one, not empty. */
export function waitSelector(opts: { id?: string | undefined; text?: string | undefined; desc?: string | undefined }): WaitSelector {
  const given = ([["id", "resourceId", opts.id], ["text", "text", opts.text], ["desc", "contentDesc", opts.desc]] as const).filter((g) => g[2] !== undefined);
  if (given.length === 0) throw new CliError(Errors.INVALID_ARGUMENT, `say what to wait for: ${USAGE}`, "text");
  if (given.length > 1) throw new CliError(Errors.INVALID_ARGUMENT, `say one of --id, --text or --desc, not ${given.map(([n]) => `--${n}`).join(" and ")}: ${USAGE}`, given[1]?.[0]);
  const [flag, by, value] = given[0] as readonly [string, WaitSelector["by"], string];
  if (value === "") throw new CliError(Errors.INVALID_ARGUMENT, `--${flag} must not be empty`, flag);
  if (value.length > 1000) throw new CliError(Errors.INVALID_ARGUMENT, `--${flag} is at most 1000 characters`, flag);
  return { by, value };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((done) => {
    if (signal.aborted) return done();
    const timer = setTimeout(finish, ms);
    function finish() {
      clearTimeout(timer);
      signal.removeEventListener("abort", finish);
      done();
    }
    signal.addEventListener("abort", finish, { once: true });
  });
}

/**
 * `farm wait`: polls the UI tree until the selector's element is on the
 * screen (or, --gone, until none is). The polls go without the session
 * header, so they are not steps; the outcome is one step of its own.
 */
export const wait: Action<typeof waitOptions> = async (input) => {
  const { opts, ctx } = input;
  const selector = waitSelector(opts);
  const target = deviceTarget({ ...opts, requestId: undefined });
  const settings: WaitSettings = { selector, gone: opts.gone, timeoutMs: opts.timeout, intervalMs: opts.interval, appPackage: opts.appPackage ?? "" };
  const signal = ctx.stopSignal;
  const farm = libraryClient({ ...clientSession(input), timeoutMs: CALL_TIMEOUT_MS });
  // Without the session header: the polls and the screenshots are not steps; the wait is one, appended below.
  const device = farm.device(target.serial, { lease: opts.lease || undefined, agent: target.agent });
  const recorder = await openSessionRecorder(ctx.env, farm, target.serial, CALL_TIMEOUT_MS);
  // In a session the wait keeps the screen as it started and as it ended, like a routed step; --timeout starts after the first.
  const shot = (): Promise<StepShot> => takeStepShot(device, CALL_TIMEOUT_MS);
  const before = recorder ? await shot() : undefined;

  const startMs = Date.now();
  const t0 = performance.now();
  const deadline = t0 + settings.timeoutMs;
  const trace = new PollTrace();
  let matched: ReturnType<typeof matchingElements> | undefined;
  let fatal: { code: ErrorCode; message: string; field?: string } | undefined;
  for (;;) {
    const started = performance.now();
    const atMs = Math.round(started - t0);
    try {
      // What is left of the wait, but at least MIN_POLL_MS: a last poll cut to a few milliseconds would only fail.
      const res = await asCli(device.uiTree({ appPackage: settings.appPackage, timeoutMs: Math.max(MIN_POLL_MS, Math.round(deadline - started)) }));
      const roots = res.roots.map(plainElement);
      const nodeCount = res.nodeCount || flatten(roots).length;
      const found = matchingElements(roots, selector);
      trace.lastTree = { atMs, source: res.source, nodeCount, roots };
      trace.add({ poll: trace.polls + 1, atMs, tookMs: Math.round(performance.now() - started), nodeCount, matches: found.length });
      if (settings.gone ? found.length === 0 : found.length > 0) {
        matched = found;
        break;
      }
    } catch (err) {
      if (signal.aborted) throw err;
      const r = cliErrorReport(err);
      trace.add({ poll: trace.polls + 1, atMs, tookMs: Math.round(performance.now() - started), errorCode: r.code, errorMessage: r.message.slice(0, 300) });
      if (FATAL.has(r.code)) {
        fatal = { code: r.code, message: r.message, ...(r.field ? { field: r.field } : {}) };
        break;
      }
    }
    if (performance.now() >= deadline) break;
    await sleep(Math.min(settings.intervalMs, deadline - performance.now()), signal);
    if (signal.aborted) throw new ConnectError("farm wait was stopped", Code.Canceled);
    if (performance.now() >= deadline) break;
  }
  const waitedMs = performance.now() - t0;
  const what = selectorText(selector);
  const stepArguments: JsonObject = { selector: selectorJson(selector), gone: settings.gone, timeoutMs: settings.timeoutMs, intervalMs: settings.intervalMs, ...(settings.appPackage ? { appPackage: settings.appPackage } : {}) };
  const description = settings.gone ? `wait until ${what} is gone` : `wait for ${what}`;

  if (matched) {
    const elements = settings.gone ? [] : flatten(matched.map((e) => ({ ...e, children: [] })));
    const response = { polls: trace.polls, waitedMs: Math.round(waitedMs), ...(settings.gone ? {} : { matches: matched.length }) };
    const recorded = recorder && before ? await recordStep(recorder, { action: "wait", description, arguments: stepArguments, ok: true, response, files: [], startMs, durationMs: waitedMs, before, after: await shot() }) : undefined;
    const data = { selector: selectorJson(selector), gone: settings.gone, ...response, elements, ...(recorded ? { sessionStep: recorded } : {}) };
    const pretty = () => `${what} ${settings.gone ? "is gone" : "is on the screen"} after ${Math.round(waitedMs)} ms (${trace.polls} poll${trace.polls === 1 ? "" : "s"})`;
    if (recorded && !recorded.ok) {
      const message = `the wait succeeded but could not be recorded in session ${recorded.sessionId}: ${recorded.message}`;
      ctx.printer.emit({ ...data, ok: false, code: recorded.code, message }, () => `${pretty()}\n${errorLine({ code: recorded.code, message })}`);
      return 1;
    }
    ctx.printer.result(data, pretty);
    return 0;
  }

  // A timeout, or a poll error waiting cannot cure: the diagnosis goes with it, and never changes it.
  const result: { code: ErrorCode; message: string; waitedMs: number } = fatal
    ? { code: fatal.code, message: `${description} stopped: ${fatal.message}`, waitedMs }
    : {
      code: Errors.COMMAND_TIMEOUT.code,
      message: `${settings.gone ? `${what} was still on the screen after` : `no element with ${what} appeared within`} ${settings.timeoutMs} ms (${trace.polls} poll${trace.polls === 1 ? "" : "s"})`,
      waitedMs,
    };
  const fileName = fatal ? "wait-error.json" : "wait-timeout.json";
  const diagnosis = waitDiagnosis(settings, trace, result, { farmVersion: FARM_VERSION, sessionId: recorder?.sessionId ?? "", policySha256: recorder?.policySha256 ?? "" });
  const json = Buffer.from(JSON.stringify(diagnosis, null, 2) + "\n");
  let diagnosisFile: string | undefined;
  if (opts.outputDir) {
    const dir = resolve(opts.outputDir);
    await mkdir(dir, { recursive: true });
    diagnosisFile = join(dir, fileName);
    await writeFile(diagnosisFile, json);
  } else {
    ctx.writeErr(diagnosisSummary(settings, trace, result) + "\n");
  }
  let recorded: Recorded | undefined;
  if (recorder && before) {
    const file: StepFile = { name: fileName, kind: "diagnosis", provider: "runner", mimeType: "application/json", when: "", bytes: json };
    recorded = await recordStep(recorder, {
      action: "wait",
      description,
      arguments: stepArguments,
      ok: false,
      errorCode: result.code,
      errorMessage: result.message,
      response: { polls: trace.polls, waitedMs: Math.round(waitedMs), failedPolls: trace.failedPolls(), firstNonEmptyAtMs: trace.firstNonEmptyAtMs, elementCount: trace.lastTree?.nodeCount ?? 0 },
      files: [file],
      startMs,
      durationMs: waitedMs,
      before,
      after: await shot(),
    });
    if (!recorded.ok) ctx.writeErr(`farm wait: could not record the wait in session ${recorded.sessionId}: ${recorded.message} [${recorded.code}]\n`);
  }
  const data = {
    ok: false,
    code: result.code,
    message: result.message,
    ...(fatal?.field ? { field: fatal.field } : {}),
    polls: trace.polls,
    waitedMs: Math.round(waitedMs),
    firstNonEmptyAtMs: trace.firstNonEmptyAtMs,
    elementCount: trace.lastTree?.nodeCount ?? 0,
    ...(diagnosisFile ? { diagnosisFile } : {}),
    ...(recorded ? { sessionStep: recorded } : {}),
  };
  ctx.printer.emit(data, () => [errorLine(result), ...(diagnosisFile ? [`diagnosis: ${diagnosisFile}`] : []), ...(recorded?.ok ? [`recorded as step ${recorded.sequence} of session ${recorded.sessionId}`] : [])].join("\n"));
  return 1;
};
