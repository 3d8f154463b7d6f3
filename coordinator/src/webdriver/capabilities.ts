import { WebDriverError } from "./webdriver-error.js";
import { apiLevelsOf } from "./android-versions.js";
import { parsePolicy } from "@farm/shared/capture-policy/policy";

/** What a new-session request asks of farm, read from its W3C capabilities. */
export interface SessionRequest {
  /** The lease selector: serial (or physical id, or its unique prefix), model, labels, API levels. */
  selector: { serial: string; model: string; labels: Record<string, string>; apiLevelMin: number; apiLevelMax: number };
  /** How long to queue for a free phone (farm:waitSeconds); 0 fails at once when none is free. */
  waitMs: number;
  /** A session with no command for this long is released (appium:newCommandTimeout, seconds). */
  newCommandTimeoutMs: number;
  /** The implicit wait for finds (W3C timeouts.implicit). */
  implicitWaitMs: number;
  /** farm:session: record the WebDriver session as a farm session of this name. */
  sessionName?: string;
  /** farm:policy: the recorded session's capture policy, as JSON. */
  policyJson?: string;
  /** farm:secrets: values masked in everything the recorded session stores. */
  secrets: { name: string; value: string }[];
  /** farm:token: the user token, for clients that cannot set an Authorization header. */
  token?: string;
  /** appium:appPackage / appium:appActivity: started once the phone is leased. */
  app?: { package: string; activity: string };
  /** The capabilities as asked (without farm:token and farm:secrets' values), for the answer. */
  asked: Record<string, unknown>;
}

export const DEFAULT_NEW_COMMAND_TIMEOUT_MS = 60_000;
const MAX_WAIT_SECONDS = 3_600;
const MAX_NEW_COMMAND_TIMEOUT_S = 86_400;
const MAX_POLICY_BYTES = 64 * 1024;
const MAX_SECRETS = 32;
const MAX_SECRET_BYTES = 4 * 1024;
const MAX_NAME = 200;
const PACKAGE = /^[A-Za-z][\w]*(\.[A-Za-z_][\w]*)+$/;
const ACTIVITY = /^\.?[A-Za-z_][\w$]*(\.[A-Za-z_][\w$]*)*$/;

/** W3C's own capabilities (https://www.w3.org/TR/webdriver2/#capabilities); any other name needs a vendor prefix. */
const standard = new Set([
  "browserName",
  "browserVersion",
  "platformName",
  "acceptInsecureCerts",
  "pageLoadStrategy",
  "proxy",
  "setWindowRect",
  "timeouts",
  "strictFileInteractability",
  "unhandledPromptBehavior",
  "userAgent",
  "webSocketUrl",
]);

/** The farm: capabilities; any other farm: name is a mistake worth a 400. */
const farmCaps = new Set(["farm:labels", "farm:waitSeconds", "farm:session", "farm:policy", "farm:secrets", "farm:token"]);

/**
 * appium: capabilities farm reads. Other appium: ones are accepted and
 * ignored (docs/webdriver.md lists the common ones), except those whose
 * silent omission would make a test pass for the wrong reason.
 */
const refusedAppium: Record<string, string> = {
  "appium:app": "farm never reads an app path or URL on the coordinator's side; install the APK's bytes with driver.installApp through mobile: installApp, or `farm install` before the test",
  "appium:otherApps": "farm never reads app paths on the coordinator's side; install each APK with mobile: installApp",
};

/**
 * Reads a new-session body (`{capabilities: {alwaysMatch, firstMatch}}`):
 * the first firstMatch entry that merges with alwaysMatch and reads
 * cleanly wins (W3C's processing, without browser matching). Bad shapes and
 * unknown farm: names are "invalid argument" (HTTP 400); what no phone can
 * satisfy (another platform) is "session not created".
 */
export function parseNewSession(body: unknown): SessionRequest {
  if (!isObject(body)) throw invalid("the body", "must be a JSON object with `capabilities`");
  const caps = body["capabilities"];
  if (!isObject(caps)) throw invalid("capabilities", "must be an object ({alwaysMatch, firstMatch}); the legacy desiredCapabilities alone are not read");
  const always = caps["alwaysMatch"] ?? {};
  if (!isObject(always)) throw invalid("capabilities.alwaysMatch", "must be an object");
  const first = caps["firstMatch"] ?? [{}];
  if (!Array.isArray(first) || first.length === 0) throw invalid("capabilities.firstMatch", "must be a non-empty array of objects");
  let firstError: unknown;
  for (const [i, entry] of first.entries()) {
    if (!isObject(entry)) throw invalid(`capabilities.firstMatch[${i}]`, "must be an object");
    for (const k of Object.keys(entry)) if (Object.hasOwn(always, k)) throw invalid(`capabilities.firstMatch[${i}].${k}`, "is also in alwaysMatch");
    try {
      return readCapabilities({ ...always, ...entry });
    } catch (err) {
      // A shape error is the caller's mistake whichever entry it is in.
      if (err instanceof WebDriverError && err.code === "invalid argument") throw err;
      firstError ??= err;
    }
  }
  throw firstError;
}

function readCapabilities(caps: Record<string, unknown>): SessionRequest {
  const asked: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(caps)) {
    if (!k.includes(":") && !standard.has(k)) throw invalid(k, "is not a W3C capability; vendor capabilities need a prefix (appium:, farm:)");
    if (k.startsWith("farm:") && !farmCaps.has(k)) throw invalid(k, `is not a farm capability (farm reads ${[...farmCaps].join(", ")})`);
    const refused = refusedAppium[k];
    if (refused !== undefined) throw invalid(k, refused);
    if (k === "farm:token") continue;
    asked[k] = k === "farm:secrets" && isObject(v) ? Object.fromEntries(Object.keys(v).map((name) => [name, "***"])) : v;
  }
  const platform = optString(caps, "platformName");
  if (platform !== undefined && platform.toLowerCase() !== "android") throw notCreated("platformName", `${JSON.stringify(platform)}: farm's WebDriver endpoint drives Android phones`);
  const browser = optString(caps, "browserName");
  if (browser !== undefined && browser !== "") throw notCreated("browserName", `${JSON.stringify(browser)}: farm drives native apps, not a browser`);
  const selector = { serial: "", model: "", labels: {} as Record<string, string>, apiLevelMin: 0, apiLevelMax: 0 };
  const version = optString(caps, "appium:platformVersion");
  if (version !== undefined && version.trim() !== "") {
    const levels = apiLevelsOf(version);
    if (!levels) throw notCreated("appium:platformVersion", `${JSON.stringify(version)} is not an Android release farm knows (write it as 13, 12.1, 8.0, …)`);
    selector.apiLevelMin = levels.min;
    selector.apiLevelMax = levels.max;
  }
  const udid = optString(caps, "appium:udid");
  if (udid !== undefined && udid.trim() !== "") selector.serial = udid.trim();
  const deviceName = optString(caps, "appium:deviceName");
  if (deviceName !== undefined && deviceName.trim() !== "") applyDeviceName(selector, deviceName.trim());
  selector.labels = labelsOf(caps["farm:labels"]);
  const wait = optNumber(caps, "farm:waitSeconds", 0, MAX_WAIT_SECONDS) ?? 0;
  const idle = optNumber(caps, "appium:newCommandTimeout", 1, MAX_NEW_COMMAND_TIMEOUT_S);
  const sessionName = optString(caps, "farm:session");
  if (sessionName !== undefined && (sessionName.trim() === "" || sessionName.length > MAX_NAME)) throw invalid("farm:session", `names the recorded session: 1 to ${MAX_NAME} characters`);
  const policy = caps["farm:policy"];
  let policyJson: string | undefined;
  if (policy !== undefined) {
    policyJson = typeof policy === "string" ? policy : isObject(policy) ? JSON.stringify(policy) : undefined;
    if (policyJson === undefined) throw invalid("farm:policy", "must be a capture policy: an object, or its JSON as a string");
    if (Buffer.byteLength(policyJson) > MAX_POLICY_BYTES) throw invalid("farm:policy", `is at most ${MAX_POLICY_BYTES} bytes`);
    if (sessionName === undefined) throw invalid("farm:policy", "applies to a recorded session: set farm:session too");
    try {
      // Checked here, before a phone is leased; the session service checks it again.
      policyJson = JSON.stringify(parsePolicy(policyJson, "json"));
    } catch (err) {
      throw invalid("farm:policy", `is not a capture policy: ${(err as Error).message}`);
    }
  }
  const secrets = secretsOf(caps["farm:secrets"]);
  if (secrets.length > 0 && sessionName === undefined) throw invalid("farm:secrets", "are masked in a recorded session: set farm:session too");
  const token = optString(caps, "farm:token");
  const timeouts = caps["timeouts"];
  let implicitWaitMs = 0;
  if (timeouts !== undefined) {
    if (!isObject(timeouts)) throw invalid("timeouts", "must be an object");
    const implicit = timeouts["implicit"];
    if (implicit !== undefined) implicitWaitMs = checkTimeout("timeouts.implicit", implicit);
  }
  const appPackage = optString(caps, "appium:appPackage");
  const appActivity = optString(caps, "appium:appActivity");
  let app: SessionRequest["app"];
  if (appPackage !== undefined) {
    if (!PACKAGE.test(appPackage)) throw invalid("appium:appPackage", "must be an Android package name (com.example.app)");
    if (appActivity === undefined || !ACTIVITY.test(appActivity)) throw invalid("appium:appActivity", "names the activity to start with appium:appPackage (.MainActivity)");
    app = { package: appPackage, activity: appActivity };
  } else if (appActivity !== undefined) throw invalid("appium:appActivity", "needs appium:appPackage");
  return {
    selector,
    waitMs: wait * 1000,
    newCommandTimeoutMs: idle === undefined ? DEFAULT_NEW_COMMAND_TIMEOUT_MS : idle * 1000,
    implicitWaitMs,
    ...(sessionName !== undefined ? { sessionName: sessionName.trim() } : {}),
    ...(policyJson !== undefined ? { policyJson } : {}),
    secrets,
    ...(token !== undefined ? { token } : {}),
    ...(app ? { app } : {}),
    asked,
  };
}

/**
 * `appium:deviceName`: a model ("Pixel 7") unless prefixed like the CLI's
 * own selectors: `serial:…` (a serial, physical id or its unique prefix) or
 * `model:…`.
 */
function applyDeviceName(selector: SessionRequest["selector"], name: string): void {
  if (name.startsWith("serial:")) {
    const serial = name.slice("serial:".length).trim();
    if (selector.serial !== "" && selector.serial !== serial) throw invalid("appium:deviceName", `names serial ${serial} but appium:udid names ${selector.serial}`);
    selector.serial = serial;
  } else selector.model = name.startsWith("model:") ? name.slice("model:".length).trim() : name;
}

/** farm:labels: `{"pool": "ci"}` or `["pool=ci"]`. */
function labelsOf(v: unknown): Record<string, string> {
  if (v === undefined) return {};
  const out: Record<string, string> = {};
  const pairs: [string, unknown][] = Array.isArray(v)
    ? v.map((p, i) => {
      if (typeof p !== "string" || !p.includes("=")) throw invalid(`farm:labels[${i}]`, "must be KEY=VALUE");
      const at = p.indexOf("=");
      return [p.slice(0, at), p.slice(at + 1)];
    })
    : isObject(v)
    ? Object.entries(v)
    : (() => {
      throw invalid("farm:labels", "must be an object of label values ({\"pool\": \"ci\"}) or KEY=VALUE strings");
    })();
  for (const [k, val] of pairs) {
    if (typeof val !== "string" || k === "" || k.length > 63 || val.length > 253) throw invalid(`farm:labels.${k}`, "keys are 1..63 characters, values strings of at most 253");
    out[k] = val;
  }
  return out;
}

/** farm:secrets: `{"NAME": "value"}`; names as --secret takes them (environment variable names). */
function secretsOf(v: unknown): { name: string; value: string }[] {
  if (v === undefined) return [];
  if (!isObject(v)) throw invalid("farm:secrets", "must be an object of names to values ({\"API_KEY\": \"…\"})");
  const out = Object.entries(v).map(([name, value]) => {
    if (!/^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(name)) throw invalid(`farm:secrets.${name}`, "names are like environment variable names");
    if (typeof value !== "string" || value === "" || Buffer.byteLength(value) > MAX_SECRET_BYTES) throw invalid(`farm:secrets.${name}`, `must be a non-empty string of at most ${MAX_SECRET_BYTES} bytes`);
    return { name, value };
  });
  if (out.length > MAX_SECRETS) throw invalid("farm:secrets", `at most ${MAX_SECRETS}`);
  return out;
}

/** A W3C timeout: an integer 0..2^53-1 milliseconds; farm waits at most an hour. */
export function checkTimeout(field: string, v: unknown): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 3_600_000) throw invalid(field, "must be an integer number of milliseconds, 0..3600000");
  return v;
}

function optString(caps: Record<string, unknown>, k: string): string | undefined {
  const v = caps[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw invalid(k, "must be a string");
  return v;
}

function optNumber(caps: Record<string, unknown>, k: string, min: number, max: number): number | undefined {
  const v = caps[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || v < min || v > max) throw invalid(k, `must be a number of seconds, ${min}..${max}`);
  return v;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function invalid(field: string, what: string): WebDriverError {
  return new WebDriverError("invalid argument", `INVALID_ARGUMENT: ${field} ${what}`);
}

function notCreated(field: string, what: string): WebDriverError {
  return new WebDriverError("session not created", `NO_DEVICE_MATCHES: ${field} ${what}`);
}
