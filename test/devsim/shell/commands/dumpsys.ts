import type { DeviceState } from "../../device/device-state.js";
import type { ShellCommand } from "../command.js";

/** A stable hex id for an object, like the identity hash codes dumpsys prints. */
function hash(text: string): string {
  let value = 0x811c9dc5;
  for (const char of text) value = Math.imul(value ^ char.charCodeAt(0), 0x01000193) >>> 0;
  return value.toString(16).padStart(7, "0").slice(0, 7);
}

function focus(device: DeviceState): { component: string; window: string; record: string } {
  const top = device.screen.top;
  const component = `${top.packageName}/${top.activity}`;
  const record = `ActivityRecord{${hash(component)} u0 ${component} t${10 + top.packageName.length}}`;
  const window = device.display.locked ? `Window{${hash("NotificationShade")} u0 NotificationShade}` : `Window{${hash(`w${component}`)} u0 ${component}}`;
  return { component, window, record };
}

function windowDump(device: DeviceState): string {
  const d = device.display;
  const { width, height } = d.logicalSize;
  const natural = d.naturalSize;
  const f = focus(device);
  const locked = d.locked;
  return [
    "WINDOW MANAGER DISPLAY CONTENTS (dumpsys window displays)",
    `  Display: mDisplayId=0 rootTasks=3`,
    `    init=${d.physical.width}x${d.physical.height} ${d.physicalDensity}dpi base=${natural.width}x${natural.height} ${d.density}dpi cur=${width}x${height} app=${width}x${height - d.dp(48)} rng=${Math.min(width, height)}x${
      Math.min(width, height) - d.dp(24)
    }-${Math.max(width, height)}x${Math.max(width, height) - d.dp(24)}`,
    `    deferred=false mLayoutNeeded=false mTouchExcludeRegion=SkRegion((0,0,${width},${height}))`,
    `  mCurrentFocus=${f.window}`,
    `  mFocusedApp=${f.record}`,
    `  DisplayRotation`,
    `    mCurrentAppOrientation=SCREEN_ORIENTATION_UNSPECIFIED`,
    `    mRotation=${d.rotation} mDeferredRotationPauseCount=0`,
    `    mUserRotationMode=USER_ROTATION_LOCKED mUserRotation=ROTATION_${d.rotation * 90} mAllowAllRotations=false`,
    `  mGlobalConfiguration={1.0 ?mcc?mnc [en_US] ldltr sw${Math.round((Math.min(width, height) * 160) / d.density)}dp w${Math.round((width * 160) / d.density)}dp h${Math.round((height * 160) / d.density)}dp ${d.density}dpi ${
      width > height ? "land" : "port"
    }}`,
    `  mHoldScreenWindow=null`,
    `  mObscuringWindow=null`,
    `  mShowingLockscreen=${locked} mShowingDream=false mDreamingLockscreen=${locked && !d.screenOn}`,
    `  isStatusBarKeyguard=${locked}`,
    `  mKeyguardShowing=${locked} mKeyguardOccluded=false`,
    `  mScreenOnEarly=${d.screenOn} mScreenOnFully=${d.screenOn}`,
    `  mAwake=${d.screenOn}`,
    "",
  ].join("\n");
}

function powerDump(device: DeviceState): string {
  const on = device.display.screenOn;
  return [
    "POWER MANAGER (dumpsys power)",
    "Power Manager State:",
    `  mWakefulness=${on ? "Awake" : "Asleep"}`,
    `  mWakefulnessChanging=false`,
    `  mIsPowered=true`,
    `  mPlugType=2`,
    `  mStayOn=false`,
    `  mHoldingDisplaySuspendBlocker=${on}`,
    `  mDisplayReady=true`,
    `  Display Power: state=${on ? "ON" : "OFF"}`,
    "",
  ].join("\n");
}

function displayDump(device: DeviceState): string {
  const d = device.display;
  const { width, height } = d.logicalSize;
  const state = d.screenOn ? "ON" : "OFF";
  const info = (w: number, h: number) =>
    `DisplayInfo{"Built-in Screen", displayId 0, FLAG_SECURE, FLAG_SUPPORTS_PROTECTED_BUFFERS, FLAG_TRUSTED, real ${w} x ${h}, largest app ${Math.max(w, h)} x ${Math.max(w, h)}, smallest app ${Math.min(w, h)} x ${
      Math.min(w, h)
    }, appVsyncOff 0, presDeadline 16666666, mode 1, defaultMode 1, modes [{id=1, width=${d.physical.width}, height=${d.physical.height}, fps=60.0}], rotation ${d.rotation}, density ${d.density} (${d.physicalDensity}.0 x ${d.physicalDensity}.0) dpi, layerStack 0, type INTERNAL, address {port=0}, state ${state}, uniqueId "local:0"}`;
  return [
    "DISPLAY MANAGER (dumpsys display)",
    `  mScreenState=${state}`,
    `  mDefaultDisplayDefaultColorMode=0`,
    "Display Devices: size=1",
    `  DisplayDeviceInfo{"Built-in Screen": uniqueId="local:0", ${d.physical.width} x ${d.physical.height}, modeId 1, defaultModeId 1, supportedModes [{id=1, width=${d.physical.width}, height=${d.physical.height}, fps=60.0}], density ${d.physicalDensity}, ${d.physicalDensity}.0 x ${d.physicalDensity}.0 dpi, appVsyncOff 0, presDeadline 16666666, touch INTERNAL, rotation 0, type INTERNAL, address {port=0}, state ${state}, FLAG_DEFAULT_DISPLAY, FLAG_ROTATES_WITH_CONTENT, FLAG_SECURE, FLAG_SUPPORTS_PROTECTED_BUFFERS}`,
    "Logical Displays: size=1",
    "  Display 0:",
    `    mBaseDisplayInfo=${info(d.physical.width, d.physical.height)}`,
    `    mOverrideDisplayInfo=${info(width, height)}`,
    "",
  ].join("\n");
}

function inputDump(device: DeviceState): string {
  const d = device.display;
  const { width, height } = d.logicalSize;
  const natural = d.naturalSize;
  return [
    "INPUT MANAGER (dumpsys input)",
    "Input Reader State:",
    "  Device 3: sec_touchscreen",
    "    Touch Input Mapper (mode DIRECT):",
    `      Viewport INTERNAL: displayId=0, uniqueId=local:0, port=0, orientation=${d.rotation}, logicalFrame=[0, 0, ${width}, ${height}], physicalFrame=[0, 0, ${width}, ${height}], deviceSize=[${natural.width}, ${natural.height}], isActive=true`,
    `      SurfaceWidth: ${width}px`,
    `      SurfaceHeight: ${height}px`,
    `      SurfaceOrientation: ${d.rotation}`,
    "Input Dispatcher State:",
    `  FocusedApplications:`,
    `    displayId=0, name='${focus(device).record}'`,
    `  FocusedWindows:`,
    `    displayId=0, name='${focus(device).window.replace(/^Window\{[0-9a-f]+ u0 /, "").replace(/\}$/, "")}'`,
    "",
  ].join("\n");
}

function activityDump(device: DeviceState): string {
  const f = focus(device);
  return ["ACTIVITY MANAGER ACTIVITIES (dumpsys activity activities)", `  ResumedActivity: ${f.record}`, `  mResumedActivity: ${f.record}`, `  mFocusedApp=${f.record}`, ""].join("\n");
}

function packageDump(device: DeviceState, name: string | undefined): string | undefined {
  const pkg = name === undefined ? undefined : device.packages.get(name);
  if (!pkg) return undefined;
  const flags = ["HAS_CODE", "ALLOW_CLEAR_USER_DATA", ...(pkg.debuggable ? ["DEBUGGABLE"] : []), ...(pkg.system ? ["SYSTEM"] : [])];
  return [
    "Packages:",
    `  Package [${pkg.name}] (${hash(pkg.name)}):`,
    `    userId=${pkg.uid}`,
    `    codePath=${pkg.apkPath.replace(/\/base\.apk$/, "")}`,
    `    versionCode=${pkg.versionCode} minSdk=24 targetSdk=34`,
    `    versionName=${pkg.versionName}`,
    `    flags=[ ${flags.join(" ")} ]`,
    `    firstInstallTime=${new Date(pkg.firstInstallTime).toISOString().replace("T", " ").slice(0, 19)}`,
    "",
  ].join("\n");
}

/** `dumpsys window|display|power|input|activity|package PKG`: the parts farm and automation tools parse. */
export const dumpsysCommand: ShellCommand = async (ctx) => {
  const [service, ...rest] = ctx.args;
  const device = ctx.device;
  let text: string | undefined;
  switch (service) {
    case "window":
      text = windowDump(device);
      break;
    case "power":
      text = powerDump(device);
      break;
    case "display":
      text = displayDump(device);
      break;
    case "input":
      text = device.faults.current.rotationUnavailable
        ? "Permission Denial: can't dump input from from pid=4242, uid=2000 due to missing android.permission.DUMP permission\n"
        : inputDump(device);
      break;
    case "activity":
      text = activityDump(device);
      break;
    case "package":
      text = packageDump(device, rest.find((arg) => !arg.startsWith("-")));
      if (text === undefined) text = `Unable to find package: ${rest[0] ?? ""}\n`;
      break;
    case undefined:
      text = ["window", "display", "power", "input", "activity"].map((name) => `Currently running services:\n  ${name}\n`).join("");
      break;
    default:
      await ctx.stderr.write(`Can't find service: ${service}\n`);
      return 0;
  }
  await ctx.stdout.write(text);
  return 0;
};
