import { keyguardScreen, SYSTEMUI_PACKAGE } from "./apps/keyguard.js";
import { launcherApp } from "./apps/launcher-app.js";
import type { Display } from "./display.js";
import { KEYCODE } from "./keycodes.js";
import { layoutScreen } from "./layout.js";
import type { AppModel, AppValues, ScreenContext } from "./screen-spec.js";
import { hitTest, type TapAction, type UiNode } from "./ui-node.js";

/** An activity on the back stack. */
export interface ActivityEntry {
  packageName: string;
  /** Short activity name as `am` prints it, e.g. `.MainActivity`. */
  activity: string;
  screen: string;
}

export interface ScreenHost {
  app(packageName: string): AppModel | undefined;
  launchable(): ReadonlyArray<{ packageName: string; label: string }>;
  prop(key: string): string | undefined;
  /** An app's process must run while it is shown. */
  ensureRunning(packageName: string): void;
}

/**
 * What is on the screen: the back stack of activities (launcher at the
 * bottom), per-app widget values, the focused text field, and the keyguard.
 * Every change bumps `version` and notifies listeners (screenrecord).
 */
export class ScreenModel {
  private stack: ActivityEntry[] = [{ packageName: launcherApp.packageName, activity: launcherApp.mainActivity, screen: "main" }];
  private readonly values = new Map<string, AppValues>();
  private focusedKey: string | undefined;
  private listeners = new Set<() => void>();
  version = 0;

  constructor(
    readonly display: Display,
    private readonly host: ScreenHost,
  ) {}

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Call after changing the display directly (rotation, size, power). */
  changed(): void {
    this.version++;
    for (const listener of this.listeners) listener();
  }

  get top(): ActivityEntry {
    return this.stack[this.stack.length - 1]!;
  }

  /** The app in front: the keyguard's package while locked. */
  get focusedPackage(): string {
    return this.display.locked ? SYSTEMUI_PACKAGE : this.top.packageName;
  }

  /** The UI tree of the focused window, or undefined while the screen is off. */
  tree(): UiNode | undefined {
    if (!this.display.screenOn) return undefined;
    if (this.display.locked) return layoutScreen(keyguardScreen(new Date()), SYSTEMUI_PACKAGE, this.display, new Map(), undefined);
    const { packageName, screen } = this.top;
    const app = this.appModel(packageName);
    const spec = app?.screen(screen, this.context(packageName));
    if (!spec) return undefined;
    return layoutScreen(spec, packageName, this.display, this.valuesOf(packageName), this.focusedKey);
  }

  /** `am start -n PKG/ACT`: undefined on success, else adb's error text. */
  start(packageName: string, activity?: string): string | undefined {
    const app = this.appModel(packageName);
    const short = activity?.startsWith(`${packageName}.`) ? activity.slice(packageName.length) : activity;
    const screen = !app ? undefined : short === undefined || short === app.mainActivity ? "main" : app.activities[short];
    if (!app || screen === undefined) return `Error type 3\nError: Activity class {${packageName}/${activity ?? ""}} does not exist.`;
    this.host.ensureRunning(packageName);
    const entry = { packageName, activity: short ?? app.mainActivity, screen };
    if (packageName === launcherApp.packageName) this.stack = [entry];
    else this.stack.push(entry);
    this.focusedKey = undefined;
    this.changed();
    return undefined;
  }

  /** The app's activities leave the stack and its in-memory values are lost. */
  forceStop(packageName: string): void {
    if (packageName === launcherApp.packageName) return;
    const before = this.stack.length;
    this.stack = this.stack.filter((entry) => entry.packageName !== packageName);
    this.values.delete(packageName);
    if (this.stack.length !== before) this.changed();
  }

  home(): void {
    this.stack = [this.stack[0]!];
    this.focusedKey = undefined;
    this.changed();
  }

  back(): void {
    if (this.stack.length > 1) this.stack.pop();
    this.focusedKey = undefined;
    this.changed();
  }

  /** `input tap`: acts on the clickable node under the point; true if something happened. */
  tap(x: number, y: number): boolean {
    if (!this.display.screenOn || this.display.locked) return false;
    const root = this.tree();
    const target = root && hitTest(root, x, y);
    if (!target?.onTap) return false;
    this.perform(target.onTap);
    return true;
  }

  /** `input swipe`: an upward swipe dismisses the keyguard. */
  swipe(x1: number, y1: number, x2: number, y2: number): void {
    if (this.display.screenOn && this.display.locked && y1 - y2 > this.display.logicalSize.height / 4) {
      this.display.locked = false;
      this.changed();
    }
  }

  /** `input text`: typed into the focused field. */
  text(value: string): void {
    if (!this.display.screenOn || this.display.locked || this.focusedKey === undefined) return;
    const values = this.valuesOf(this.top.packageName);
    values.set(this.focusedKey, `${String(values.get(this.focusedKey) ?? "")}${value.replace(/%s/g, " ")}`);
    this.changed();
  }

  /** `input keyevent`. */
  key(code: number): void {
    const display = this.display;
    if (code === KEYCODE["KEYCODE_POWER"]) {
      display.screenOn = !display.screenOn;
      if (!display.screenOn) display.locked = true;
    } else if (code === KEYCODE["KEYCODE_WAKEUP"]) {
      display.screenOn = true;
    } else if (code === KEYCODE["KEYCODE_SLEEP"]) {
      display.screenOn = false;
      display.locked = true;
    } else if (!display.screenOn) {
      return;
    } else if (code === KEYCODE["KEYCODE_MENU"] && display.locked) {
      display.locked = false;
    } else if (display.locked) {
      return;
    } else if (code === KEYCODE["KEYCODE_HOME"]) {
      return this.home();
    } else if (code === KEYCODE["KEYCODE_BACK"]) {
      return this.back();
    } else if (code === KEYCODE["KEYCODE_DEL"] && this.focusedKey !== undefined) {
      const values = this.valuesOf(this.top.packageName);
      values.set(this.focusedKey, String(values.get(this.focusedKey) ?? "").slice(0, -1));
    } else {
      return;
    }
    this.changed();
  }

  private perform(action: TapAction): void {
    const values = this.valuesOf(this.top.packageName);
    switch (action.type) {
      case "navigate":
        this.stack.push({ ...this.top, screen: action.screen, activity: this.activityFor(this.top.packageName, action.screen) });
        this.focusedKey = undefined;
        break;
      case "back":
        return this.back();
      case "toggle":
        values.set(action.key, values.get(action.key) !== true);
        break;
      case "focus":
        this.focusedKey = action.key;
        break;
      case "set":
        values.set(action.key, action.value);
        break;
      case "launch":
        this.start(action.packageName);
        return;
    }
    this.changed();
  }

  private activityFor(packageName: string, screen: string): string {
    const app = this.appModel(packageName);
    const found = app && Object.entries(app.activities).find(([, name]) => name === screen);
    return found?.[0] ?? this.top.activity;
  }

  private appModel(packageName: string): AppModel | undefined {
    return packageName === launcherApp.packageName ? launcherApp : this.host.app(packageName);
  }

  private valuesOf(packageName: string): AppValues {
    let values = this.values.get(packageName);
    if (!values) this.values.set(packageName, values = new Map());
    return values;
  }

  private context(packageName: string): ScreenContext {
    return { values: this.valuesOf(packageName), prop: (key) => this.host.prop(key), launchable: this.host.launchable() };
  }
}
