import type { UiElement } from "@farm/shared/gen/farm/v1/ui_pb";
import type { SendInputRequest } from "@farm/shared/gen/farm/v1/device_service_pb";
import { SESSION_HEADER } from "../routing/device-service.js";
import type { FarmCalls } from "./farm-calls.js";
import { WebDriverError } from "./webdriver-error.js";
import { checkTimeout } from "./capabilities.js";
import { locatorStrategies, type LocatedElement, type LocatorStrategy } from "./locate/located-element.js";
import { findElements } from "./locate/find-elements.js";
import { pageSourceXml } from "./locate/page-source.js";
import { ElementRefs } from "./locate/element-refs.js";
import { elementAt, hierarchyRoot } from "./locate/ui-hierarchy.js";
import { elementAttribute, elementCenter, elementRect } from "./locate/element-attributes.js";
import { ELEMENT_REFERENCE_KEY as ELEMENT_KEY, gesturesFromActions, type Gesture } from "./pointer-actions.js";
import { shellCommandLine } from "./shell-line.js";

/** Each farm call's deadline; an install gets longer. */
const CALL_TIMEOUT_MS = 30_000;
const INSTALL_TIMEOUT_MS = 300_000;
/** How often an implicit wait reads the tree again (a UIAutomator dump takes ~2 s on a real phone anyway). */
const POLL_MS = 250;
/** Clear reads the field again and deletes what is left at most this often. */
const MAX_CLEAR_ROUNDS = 8;
const PACKAGE = /^[A-Za-z][\w]*(\.[A-Za-z_][\w]*)+$/;

/** The phone a session holds, as the lease granted it. */
export interface HeldPhone {
  serial: string;
  agent: string;
  physicalId: string;
  leaseId: string;
}

/**
 * One WebDriver session: a leased phone, the caller's farm client, and
 * what it remembers between commands: the last UI tree (valid until a
 * command changes the phone) and the element ids it handed out.
 */
export class WebDriverSession {
  private tree: UiElement | undefined;
  private readonly refs = new ElementRefs();
  implicitWaitMs: number;

  constructor(
    readonly id: string,
    readonly calls: FarmCalls,
    readonly phone: HeldPhone,
    implicitWaitMs: number,
    /** The recorded farm session (farm:session) each command is a step of. */
    readonly recordedSessionId: string | undefined,
  ) {
    this.implicitWaitMs = implicitWaitMs;
  }

  private get target() {
    return { serial: this.phone.serial, agent: this.phone.agent };
  }

  /** Call options of a command's own farm call: a step of the recorded session, when there is one. */
  private step(timeoutMs = CALL_TIMEOUT_MS) {
    return { timeoutMs, ...(this.recordedSessionId ? { headers: { [SESSION_HEADER]: this.recordedSessionId } } : {}) };
  }

  /** Reads the UI tree (as a recorded step when `asStep`); it becomes the cached tree. */
  private async readTree(asStep: boolean): Promise<UiElement> {
    const res = await this.calls.device.getUiTree({ target: this.target }, asStep ? this.step() : { timeoutMs: CALL_TIMEOUT_MS });
    // UIAutomator has one root per window; one hierarchy node holds them, as in its XML dump.
    this.tree = hierarchyRoot(res.roots);
    return this.tree;
  }

  /** The cached tree, or a fresh one when a command has changed the phone since. */
  private async currentTree(): Promise<UiElement> {
    return this.tree ?? (await this.readTree(false));
  }

  /** After anything that changes the phone the cached tree is no longer the screen. */
  private changed(): void {
    this.tree = undefined;
  }

  // ---- timeouts

  timeouts(): { implicit: number; pageLoad: number; script: number } {
    return { implicit: this.implicitWaitMs, pageLoad: 300_000, script: 30_000 };
  }

  setTimeouts(body: Record<string, unknown>): null {
    if (body["implicit"] !== undefined && body["implicit"] !== null) this.implicitWaitMs = checkTimeout("implicit", body["implicit"]);
    return null;
  }

  // ---- finding

  /**
   * Finds elements: the first read is a fresh UI tree (a step of a
   * recorded session); with an implicit wait, the tree is read again until
   * something matches or the wait is over.
   */
  async find(body: Record<string, unknown>, within: string | undefined, many: boolean): Promise<unknown> {
    const strategy = body["using"];
    const selector = body["value"];
    if (typeof strategy !== "string" || !(locatorStrategies as readonly string[]).includes(strategy)) {
      throw new WebDriverError("invalid argument", `INVALID_ARGUMENT: using must be one of ${locatorStrategies.join(", ")}; got ${JSON.stringify(strategy)}`);
    }
    if (typeof selector !== "string") throw new WebDriverError("invalid argument", "INVALID_ARGUMENT: value must be a string");
    const deadline = Date.now() + this.implicitWaitMs;
    let first = true;
    for (;;) {
      const root = await this.readTree(first);
      first = false;
      const parent = within === undefined ? undefined : this.refs.resolve(within, root);
      const found = findElements(root, strategy as LocatorStrategy, selector, parent);
      const left = deadline - Date.now();
      if (found.length > 0 || left <= 0) {
        if (many) return found.map((f) => ({ [ELEMENT_KEY]: this.refs.remember(f) }));
        const hit = found[0];
        if (!hit) throw new WebDriverError("no such element", `ELEMENT_NOT_FOUND: no element matches ${strategy} ${JSON.stringify(selector)}${this.implicitWaitMs > 0 ? ` within ${this.implicitWaitMs} ms` : ""}`);
        return { [ELEMENT_KEY]: this.refs.remember(hit) };
      }
      await new Promise((r) => setTimeout(r, Math.min(POLL_MS, left)));
    }
  }

  /** An element as the screen holds it now: stale when the tree at its path no longer holds it. */
  private async element(elementId: string): Promise<LocatedElement> {
    return this.refs.resolve(elementId, await this.currentTree());
  }

  // ---- element reads (from the cached tree)

  async text(elementId: string): Promise<string> {
    return (await this.element(elementId)).element.text;
  }

  async attribute(elementId: string, name: string): Promise<string | null> {
    return elementAttribute((await this.element(elementId)).element, name);
  }

  async rect(elementId: string): Promise<unknown> {
    return elementRect((await this.element(elementId)).element);
  }

  async tagName(elementId: string): Promise<string> {
    return (await this.element(elementId)).element.type;
  }

  async displayed(elementId: string): Promise<boolean> {
    const r = elementRect((await this.element(elementId)).element);
    return r.width > 0 && r.height > 0;
  }

  async enabled(elementId: string): Promise<boolean> {
    return (await this.element(elementId)).element.enabled;
  }

  async selected(elementId: string): Promise<boolean> {
    return elementAttribute((await this.element(elementId)).element, "selected") === "true" || elementAttribute((await this.element(elementId)).element, "checked") === "true";
  }

  // ---- input

  private async input(kind: SendInputRequest["kind"], asStep = true): Promise<void> {
    try {
      await this.calls.device.sendInput({ target: this.target, kind }, asStep ? this.step() : { timeoutMs: CALL_TIMEOUT_MS });
    } finally {
      this.changed();
    }
  }

  private async tapAt(x: number, y: number, asStep = true): Promise<void> {
    await this.input({ case: "tap", value: { x: Math.max(0, Math.round(x)), y: Math.max(0, Math.round(y)) } as never }, asStep);
  }

  async click(elementId: string): Promise<null> {
    const { element } = await this.element(elementId);
    const c = elementCenter(element);
    await this.tapAt(c.x, c.y);
    return null;
  }

  /**
   * Types into an element: a tap focuses it unless it has focus already
   * (journaled, not a step of its own), then the text is one step.
   */
  async sendKeys(elementId: string, body: Record<string, unknown>): Promise<null> {
    const text = typeof body["text"] === "string" ? body["text"] : Array.isArray(body["value"]) && body["value"].every((v) => typeof v === "string") ? body["value"].join("") : undefined;
    if (text === undefined) throw new WebDriverError("invalid argument", "INVALID_ARGUMENT: text must be a string");
    const { element } = await this.element(elementId);
    if (!element.focused) {
      const c = elementCenter(element);
      await this.tapAt(c.x, c.y, false);
    }
    if (text !== "") await this.input({ case: "text", value: text });
    return null;
  }

  /**
   * Clears a text field: focus it, move to the end, delete as many
   * characters as it shows (one journaled shell step). What it shows may be
   * shorter than what it holds (a secret reads as [redacted] in a recorded
   * session), so the field is read again and emptied until it reads empty.
   */
  async clear(elementId: string): Promise<null> {
    const { element, path } = await this.element(elementId);
    if (!element.focused) {
      const c = elementCenter(element);
      await this.tapAt(c.x, c.y, false);
    }
    let text = element.text;
    let settled = text === "";
    // Until it reads empty, or deleting changes nothing more (an empty field may read as its hint).
    for (let round = 0; !settled && round < MAX_CLEAR_ROUNDS; round++) {
      const dels = Array.from({ length: [...text].length }, () => "KEYCODE_DEL").join(" ");
      const r = await this.shellLine(`input keyevent KEYCODE_MOVE_END ${dels}`, round === 0);
      if (r.exitCode !== 0) throw new WebDriverError("invalid element state", `INPUT_FAILED: input keyevent exited with ${r.exitCode}: ${(r.stderr || r.stdout).slice(0, 500)}`);
      const after = elementAt(await this.readTree(false), path)?.text ?? "";
      settled = after === "" || (after === text && round > 0);
      text = after;
    }
    if (!settled) throw new WebDriverError("invalid element state", `INPUT_FAILED: the field still changes after ${MAX_CLEAR_ROUNDS} rounds of deletes`);
    return null;
  }

  async back(): Promise<null> {
    await this.input({ case: "key", value: "KEYCODE_BACK" });
    return null;
  }

  /** W3C actions: pointer taps, long presses and swipes, each a routed input. */
  async performActions(body: Record<string, unknown>): Promise<null> {
    const tree = this.tree;
    const gestures: Gesture[] = gesturesFromActions(body["actions"], (elementId) => {
      if (!tree) throw new WebDriverError("stale element reference", `element ${elementId} was found before the screen last changed; find it again`);
      return elementCenter(this.refs.resolve(elementId, tree).element);
    });
    for (const g of gestures) {
      if (g.kind === "tap") await this.tapAt(g.x, g.y);
      else {
        const r = (v: number) => Math.max(0, Math.round(v));
        await this.input({ case: "swipe", value: { x1: r(g.x1), y1: r(g.y1), x2: r(g.x2), y2: r(g.y2), durationMs: r(g.durationMs) } as never });
      }
    }
    return null;
  }

  // ---- screen

  async screenshot(): Promise<string> {
    return (await this.screenshotPng()).toString("base64");
  }

  private async screenshotPng(): Promise<Buffer> {
    const shot = await this.calls.device.takeScreenshot({ target: this.target }, { timeoutMs: CALL_TIMEOUT_MS });
    return await this.calls.download(shot.blobId, CALL_TIMEOUT_MS);
  }

  /** The element's rectangle cut from a screenshot of the phone (clipped to the screen). */
  async elementScreenshot(elementId: string): Promise<string> {
    const rect = elementRect((await this.element(elementId)).element);
    const png = await this.screenshotPng();
    // Loaded on first use: a coordinator whose clients never crop pays nothing at start.
    const { default: sharp } = await import("sharp");
    const meta = await sharp(png).metadata();
    const left = Math.max(0, Math.min(rect.x, (meta.width ?? 0) - 1));
    const top = Math.max(0, Math.min(rect.y, (meta.height ?? 0) - 1));
    const width = Math.max(1, Math.min(rect.width, (meta.width ?? 0) - left));
    const height = Math.max(1, Math.min(rect.height, (meta.height ?? 0) - top));
    return (await sharp(png).extract({ left, top, width, height }).png().toBuffer()).toString("base64");
  }

  /** The UI tree as Appium-style XML; a fresh read (a step of a recorded session). */
  async pageSource(): Promise<string> {
    return pageSourceXml(await this.readTree(true));
  }

  /** The screen's size: the union of the windows' bounds. */
  async windowRect(): Promise<{ x: number; y: number; width: number; height: number }> {
    const b = (await this.currentTree()).bounds;
    return { x: 0, y: 0, width: b?.right ?? 0, height: b?.bottom ?? 0 };
  }

  // ---- shell and apps

  private async shellLine(command: string, asStep = true): Promise<{ exitCode: number; stdout: string; stderr: string }> {
    try {
      const res = await this.calls.device.runShell({ target: this.target, command }, asStep ? this.step() : { timeoutMs: CALL_TIMEOUT_MS });
      return { exitCode: res.exitCode, stdout: Buffer.from(res.stdout).toString("utf8"), stderr: Buffer.from(res.stderr).toString("utf8") };
    } finally {
      this.changed();
    }
  }

  /** `mobile: shell` ({command, args, includeStderr}): a journaled RunShell; a non-zero exit is an error with its output. */
  async mobileShell(args: Record<string, unknown>): Promise<unknown> {
    const command = args["command"];
    if (typeof command !== "string" || command.trim() === "") throw new WebDriverError("invalid argument", "INVALID_ARGUMENT: mobile: shell needs {command: string, args?: string[]}");
    const rest = args["args"] ?? [];
    const list = typeof rest === "string" ? [rest] : rest;
    if (!Array.isArray(list) || !list.every((a) => typeof a === "string")) throw new WebDriverError("invalid argument", "INVALID_ARGUMENT: mobile: shell args must be strings");
    const r = await this.shellLine(shellCommandLine(command, list as string[]));
    if (r.exitCode !== 0) throw new WebDriverError("unknown error", `SHELL_EXIT: ${command} exited with ${r.exitCode}: ${r.stderr.slice(0, 2000)}`);
    return args["includeStderr"] === true ? { stdout: r.stdout, stderr: r.stderr } : r.stdout;
  }

  async installApk(apk: Buffer): Promise<null> {
    const blobId = await this.calls.upload(apk, "app.apk", INSTALL_TIMEOUT_MS);
    try {
      await this.calls.device.installApp({ target: this.target, blobId }, this.step(INSTALL_TIMEOUT_MS));
    } finally {
      this.changed();
    }
    return null;
  }

  async isAppInstalled(pkg: string): Promise<boolean> {
    checkPackage(pkg);
    const r = await this.calls.device.runShell({ target: this.target, command: `pm path ${pkg}` }, { timeoutMs: CALL_TIMEOUT_MS });
    return r.exitCode === 0 && Buffer.from(r.stdout).toString("utf8").startsWith("package:");
  }

  async activateApp(pkg: string): Promise<null> {
    checkPackage(pkg);
    const r = await this.shellLine(`monkey -p ${pkg} -c android.intent.category.LAUNCHER 1`);
    if (r.exitCode !== 0) throw new WebDriverError("unknown error", `SHELL_EXIT: could not start ${pkg} (exit ${r.exitCode}): ${(r.stderr || r.stdout).slice(0, 2000)}`);
    return null;
  }

  async startActivity(pkg: string, activity: string): Promise<void> {
    const r = await this.shellLine(`am start -W -n ${pkg}/${activity}`);
    if (r.exitCode !== 0) throw new WebDriverError("session not created", `SHELL_EXIT: could not start ${pkg}/${activity} (exit ${r.exitCode}): ${(r.stderr || r.stdout).slice(0, 2000)}`);
  }

  async terminateApp(pkg: string): Promise<boolean> {
    checkPackage(pkg);
    const r = await this.shellLine(`am force-stop ${pkg}`);
    if (r.exitCode !== 0) throw new WebDriverError("unknown error", `SHELL_EXIT: could not stop ${pkg} (exit ${r.exitCode}): ${r.stderr.slice(0, 2000)}`);
    return true;
  }
}

function checkPackage(pkg: string): void {
  if (!PACKAGE.test(pkg)) throw new WebDriverError("invalid argument", `INVALID_ARGUMENT: ${JSON.stringify(pkg)} is not an Android package name`);
}
