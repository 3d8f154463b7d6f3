import { describe, expect, it } from "vitest";
import { DEFAULT_NEW_COMMAND_TIMEOUT_MS, parseNewSession } from "./capabilities.js";
import { WebDriverError } from "./webdriver-error.js";

const body = (alwaysMatch: Record<string, unknown>, firstMatch?: Record<string, unknown>[]) => ({ capabilities: { alwaysMatch, ...(firstMatch ? { firstMatch } : {}) } });

function refusal(fn: () => unknown): WebDriverError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(WebDriverError);
    return err as WebDriverError;
  }
  throw new Error("expected a refusal");
}

describe("parseNewSession", () => {
  it("reads the selector, waits and the recorded session", () => {
    const r = parseNewSession(body({
      platformName: "Android",
      "appium:platformVersion": "13",
      "appium:udid": "emulator-5554",
      "appium:deviceName": "Pixel 7",
      "appium:automationName": "UiAutomator2",
      "appium:newCommandTimeout": 90,
      "farm:labels": { pool: "ci" },
      "farm:waitSeconds": 30,
      "farm:session": "login flow",
      "farm:policy": { capture: ["screenshot.after"] },
      "farm:secrets": { PASSWORD: "hunter2" },
      "farm:token": "farmu_secret",
      timeouts: { implicit: 2500 },
    }));
    expect(r.selector).toEqual({ serial: "emulator-5554", model: "Pixel 7", labels: { pool: "ci" }, apiLevelMin: 33, apiLevelMax: 33 });
    expect(r.waitMs).toBe(30_000);
    expect(r.newCommandTimeoutMs).toBe(90_000);
    expect(r.implicitWaitMs).toBe(2500);
    expect(r.sessionName).toBe("login flow");
    expect(JSON.parse(r.policyJson!)).toEqual({ capture: ["screenshot.after"] });
    expect(r.secrets).toEqual([{ name: "PASSWORD", value: "hunter2" }]);
    expect(r.token).toBe("farmu_secret");
    // The answer never carries the token or a secret's value.
    expect(JSON.stringify(r.asked)).not.toMatch(/farmu_secret|hunter2/);
    expect(r.asked["farm:secrets"]).toEqual({ PASSWORD: "***" });
  });

  it("defaults: any phone, no wait, 60 s idle", () => {
    const r = parseNewSession(body({}));
    expect(r).toMatchObject({ waitMs: 0, newCommandTimeoutMs: DEFAULT_NEW_COMMAND_TIMEOUT_MS, implicitWaitMs: 0, secrets: [] });
    expect(r.selector).toEqual({ serial: "", model: "", labels: {}, apiLevelMin: 0, apiLevelMax: 0 });
  });

  it("deviceName takes the CLI's prefixes; labels as KEY=VALUE too; 12 is API 31..32", () => {
    expect(parseNewSession(body({ "appium:deviceName": "serial:abc123" })).selector.serial).toBe("abc123");
    expect(parseNewSession(body({ "appium:deviceName": "model:Pixel 8" })).selector.model).toBe("Pixel 8");
    expect(parseNewSession(body({ "farm:labels": ["pool=ci", "os=a=b"] })).selector.labels).toEqual({ pool: "ci", os: "a=b" });
    expect(parseNewSession(body({ "appium:platformVersion": "12" })).selector).toMatchObject({ apiLevelMin: 31, apiLevelMax: 32 });
    expect(parseNewSession(body({ "appium:platformVersion": "13.0" })).selector).toMatchObject({ apiLevelMin: 33, apiLevelMax: 33 });
    expect(parseNewSession(body({ "appium:platformVersion": "8.0" })).selector).toMatchObject({ apiLevelMin: 26, apiLevelMax: 26 });
  });

  it("firstMatch entries merge with alwaysMatch; the first that reads wins", () => {
    const r = parseNewSession(body({ "farm:labels": { pool: "ci" } }, [{ platformName: "iOS" }, { platformName: "Android", "appium:udid": "x" }]));
    expect(r.selector.serial).toBe("x");
    expect(refusal(() => parseNewSession(body({ platformName: "Android" }, [{ platformName: "Android" }]))).code).toBe("invalid argument");
  });

  it("unknown farm: capabilities, bad types and unprefixed names are invalid arguments naming the field", () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ "farm:label": { a: "b" } }, "farm:label"],
      [{ "farm:waitSeconds": -1 }, "farm:waitSeconds"],
      [{ "farm:waitSeconds": "10" }, "farm:waitSeconds"],
      [{ "appium:newCommandTimeout": 0 }, "appium:newCommandTimeout"],
      [{ deviceName: "x" }, "deviceName"],
      [{ "farm:labels": "pool=ci" }, "farm:labels"],
      [{ "farm:policy": { a: 1 } }, "farm:policy"],
      [{ "farm:policy": { nope: 1 }, "farm:session": "s" }, "farm:policy"],
      [{ "farm:secrets": { "BAD NAME": "x" }, "farm:session": "s" }, "farm:secrets.BAD NAME"],
      [{ "farm:secrets": { A: "" }, "farm:session": "s" }, "farm:secrets.A"],
      [{ "farm:session": "" }, "farm:session"],
      [{ "appium:app": "/tmp/app.apk" }, "appium:app"],
      [{ "appium:appPackage": "com.example.app" }, "appium:appActivity"],
      [{ timeouts: { implicit: -5 } }, "timeouts.implicit"],
    ];
    for (const [caps, field] of cases) {
      const err = refusal(() => parseNewSession(body(caps)));
      expect(err.code, field).toBe("invalid argument");
      expect(err.httpStatus).toBe(400);
      expect(err.message).toContain(field);
      expect(err.message).toMatch(/^INVALID_ARGUMENT: /);
    }
    expect(refusal(() => parseNewSession("nope")).code).toBe("invalid argument");
    expect(refusal(() => parseNewSession({ desiredCapabilities: {} })).message).toContain("capabilities");
  });

  it("what no phone can be is session not created, naming the capability", () => {
    for (const [caps, field] of [[{ platformName: "iOS" }, "platformName"], [{ "appium:platformVersion": "99" }, "appium:platformVersion"], [{ browserName: "chrome" }, "browserName"]] as const) {
      const err = refusal(() => parseNewSession(body(caps)));
      expect(err.code).toBe("session not created");
      expect(err.message).toMatch(new RegExp(`^NO_DEVICE_MATCHES: ${field}`));
    }
  });

  it("appium:appPackage with appActivity is started after the lease", () => {
    expect(parseNewSession(body({ "appium:appPackage": "com.example.farmdemo", "appium:appActivity": ".MainActivity" })).app).toEqual({ package: "com.example.farmdemo", activity: ".MainActivity" });
  });
});
