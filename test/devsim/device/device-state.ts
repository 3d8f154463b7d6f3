import { randomBytes, randomUUID } from "node:crypto";
import { Socket } from "node:net";
import { DeviceLatency } from "../latency/device-latency.js";
import { DeviceFaults } from "../faults/device-faults.js";
import { appCaller, ROOT, SHELL, type Caller } from "../fs/caller.js";
import { populateDefaultLayout } from "../fs/default-layout.js";
import { FileSystem } from "../fs/file-system.js";
import { DEMO_PACKAGE, demoApp } from "../screen/apps/demo-app.js";
import { settingsApp } from "../screen/apps/settings-app.js";
import { launcherApp } from "../screen/apps/launcher-app.js";
import { Display, type Size } from "../screen/display.js";
import { ScreenModel } from "../screen/screen-model.js";
import { ScreenRenderer } from "../screen/screen-renderer.js";
import { FrameCount } from "../screen/frame-count.js";
import { SDK_ENDPOINT_FILE, SDK_ENDPOINT_SCHEMA, sdkSocketName, startSdkServer } from "./app-sdk-server.js";
import { LogBuffer } from "./log-buffer.js";
import { PackageManager } from "./package-manager.js";
import { SocketNamespace } from "./socket-namespace.js";
import { ProcessTable, type SimProcess } from "./process-table.js";
import { PropertyStore } from "./property-store.js";
import { SettingsStore } from "./settings-store.js";

export interface DisplaySpec extends Size {
  density: number;
}

/** Actions that reach beyond the device model to its adb side; SimDevice fills them in. */
export interface DeviceHooks {
  /** Drop every connection and stop listening. */
  vanish(): void;
  /** Drop connections, come back after downMs with a new boot id. */
  reboot(downMs?: number): void;
  /** adbd restarts (root:/unroot:): connections drop, the host reconnects. */
  restartAdbd(): void;
}

/**
 * Everything "inside" a simulated phone, independent of how it is reached
 * over adb: properties, boot identity, files, faults. The shell and services
 * operate on this.
 */
export class DeviceState {
  readonly props: PropertyStore;
  readonly fs = new FileSystem();
  readonly faults = new DeviceFaults();
  /** How long this phone takes per service (a latency profile; instant unless set). */
  readonly latency = new DeviceLatency();
  readonly packages: PackageManager;
  readonly processes = new ProcessTable();
  readonly settings = new SettingsStore();
  readonly display: Display;
  readonly screen: ScreenModel;
  readonly renderer: ScreenRenderer;
  /** Frames screenrecord has handed its encoder here (tests wait on it, not on the clock). */
  readonly recordedFrames = new FrameCount();
  readonly sockets = new SocketNamespace();
  readonly log = new LogBuffer();
  /** Packages whose process serves the farm SDK HTTP API on localabstract. */
  readonly sdkPackages = new Set<string>([DEMO_PACKAGE]);
  private readonly sdkServers = new Map<string, { started: Promise<{ port: number; close: () => Promise<void> }>; runtimeEpoch: string }>();
  /** True after `adb root` on a debuggable build: shells run as uid 0. */
  adbdRoot = false;
  hooks: DeviceHooks = { vanish: () => {}, reboot: () => {}, restartAdbd: () => {} };
  private currentBootId: string;
  private boot = new AbortController();

  constructor(props: Record<string, string>, bootId: string = randomUUID(), display: DisplaySpec = { width: 1080, height: 2400, density: 420 }) {
    this.props = new PropertyStore(props);
    this.currentBootId = bootId;
    populateDefaultLayout(this.fs, () => this.currentBootId);
    this.fs.mkdir("/proc/net", ROOT, { mode: 0o555, uid: 0, gid: 0 });
    this.fs.addSpecial("/proc/net/unix", "dynamic", () => Buffer.from(this.sockets.procNetUnix()));
    this.fs.isFull = () => this.faults.current.storageFull === true;
    this.packages = new PackageManager(this.fs);
    this.packages.install({ name: launcherApp.packageName, system: true }, launcherApp);
    this.packages.install({ name: settingsApp.packageName, system: true }, settingsApp);
    this.packages.install({ name: DEMO_PACKAGE, debuggable: true, versionName: "1.4.2", versionCode: 142 }, demoApp);
    this.display = new Display({ width: display.width, height: display.height }, display.density);
    this.screen = new ScreenModel(this.display, {
      app: (name) => this.packages.get(name)?.model,
      launchable: () => this.packages.list().filter((p) => p.model && p.name !== launcherApp.packageName).map((p) => ({ packageName: p.name, label: p.label })),
      prop: (key) => this.props.get(key),
      ensureRunning: (name) => this.ensureRunning(name),
    });
    this.renderer = new ScreenRenderer(this.screen);
    this.settings.onChange = (namespace, key, value) => {
      if (namespace === "system" && key === "user_rotation" && this.settings.get("system", "accelerometer_rotation") !== "1") {
        this.display.rotation = Number(value ?? 0) & 3;
        this.screen.changed();
      }
    };
    this.processes.onExit = (process) => {
      if (!process.packageName) return;
      this.screen.forceStop(process.packageName);
      this.stopSdk(process.packageName);
      this.log.add({ pid: this.pidOf("system_server"), priority: 4, tag: "ActivityManager", message: `Process ${process.packageName} (pid ${process.pid}) has died` });
    };
    this.bootProcesses();
  }

  /** The process of a running app, started on demand (am start, launcher). */
  ensureRunning(packageName: string): SimProcess {
    const running = this.appProcess(packageName);
    if (running) return running;
    const pkg = this.packages.get(packageName);
    const zygote = this.processes.find((p) => p.name === "zygote64");
    const process = this.processes.spawn({ ppid: zygote?.pid ?? 1, uid: pkg?.uid ?? 1000, name: packageName, args: packageName, packageName });
    this.log.add({
      pid: this.pidOf("system_server"),
      priority: 4,
      tag: "ActivityManager",
      message: `Start proc ${process.pid}:${packageName}/u0a${(pkg?.uid ?? 10000) - 10000} for top-activity {${packageName}/${this.packages.get(packageName)?.model?.mainActivity ?? ""}}`,
    });
    // The app's runtime logs from its own pid as it comes up, as ART does (tagged with the process's
    // 15-character kernel name): a line whose package only the pid tells.
    this.log.add({ pid: process.pid, priority: 4, tag: packageName.slice(-15), message: "Late-enabling -Xcheck:jni" });
    if (this.sdkPackages.has(packageName) && pkg) this.startSdk(packageName, pkg.versionName);
    return process;
  }

  private pidOf(name: string): number {
    return this.processes.find((p) => p.name === name)?.pid ?? 0;
  }

  /**
   * The app's SDK comes up with its process: a new runtime epoch, an HTTP
   * server behind localabstract:farm-sdk-EPOCH, and its endpoint descriptor
   * published in the app's private files (not ready, then ready once bound).
   */
  private startSdk(packageName: string, versionName: string): void {
    if (this.sdkServers.has(packageName)) return;
    const runtimeEpoch = randomBytes(8).toString("hex");
    const socketName = sdkSocketName(runtimeEpoch);
    const started = startSdkServer({
      packageName,
      versionName,
      runtimeEpoch,
      pid: () => this.appProcess(packageName)?.pid,
      tree: () => (this.screen.focusedPackage === packageName ? this.screen.tree() : undefined),
      faults: () => this.faults.current,
    });
    this.sdkServers.set(packageName, { started, runtimeEpoch });
    const publish = (ready: boolean) =>
      this.writeSdkDescriptor(packageName, { ok: ready, packageName, runtimeEpoch, transport: "localabstract", socketName, version: "farm-sdk/1", updatedAtMs: Date.now(), error: ready ? null : "starting" });
    publish(false);
    // Registered at once (the app "binds" as it starts); connections wait for the listener.
    this.sockets.register(`localabstract:${socketName}`, () => {
      const socket = new Socket();
      void started.then((server) => socket.connect({ host: "127.0.0.1", port: server.port }));
      return socket;
    });
    void started.then(() => {
      if (this.sdkServers.get(packageName)?.runtimeEpoch === runtimeEpoch) publish(true);
    });
  }

  /** Writes the descriptor as the app would: its own file, 0600, replaced whole. */
  writeSdkDescriptor(packageName: string, descriptor: Record<string, unknown> | string): void {
    const pkg = this.packages.get(packageName);
    if (!pkg) return;
    const text = typeof descriptor === "string" ? descriptor : `${JSON.stringify({ schema: SDK_ENDPOINT_SCHEMA, ...descriptor })}\n`;
    this.fs.writeFile(`/data/data/${packageName}/${SDK_ENDPOINT_FILE}`, Buffer.from(text), appCaller(pkg.uid), { mode: 0o600 });
  }

  /** The running SDK's runtime epoch (tests compare with what farm reports). */
  sdkRuntimeEpoch(packageName: string): string | undefined {
    return this.sdkServers.get(packageName)?.runtimeEpoch;
  }

  /** The SDK dies with its process; its descriptor stays behind, stale, as a real file would. */
  private stopSdk(packageName: string): void {
    const entry = this.sdkServers.get(packageName);
    if (!entry) return;
    this.sdkServers.delete(packageName);
    this.sockets.unregister(`localabstract:${sdkSocketName(entry.runtimeEpoch)}`);
    void entry.started.then((server) => server.close());
  }

  /** Releases host resources (SDK servers, recorders) when the simulator shuts down. */
  async dispose(): Promise<void> {
    for (const process of this.processes.list()) process.onSignal?.(9);
    const servers = [...this.sdkServers.values()];
    this.sdkServers.clear();
    await Promise.all(servers.map(async (entry) => (await entry.started).close()));
  }

  appProcess(packageName: string): SimProcess | undefined {
    return this.processes.find((p) => p.packageName === packageName);
  }

  /** Daemons a booted phone runs, started "at boot". */
  private bootProcesses(): void {
    const processes = this.processes;
    processes.clear();
    const at = Date.now() - 60_000;
    const root = (name: string, args = name) => processes.spawn({ ppid: 1, uid: 0, name, args, startTime: at });
    processes.spawn({ ppid: 0, uid: 0, name: "init", args: "/system/bin/init second_stage", startTime: at });
    processes.spawn({ ppid: 0, uid: 0, name: "kthreadd", args: "[kthreadd]", startTime: at });
    root("ueventd", "/system/bin/ueventd");
    processes.spawn({ ppid: 1, uid: 1036, name: "logd", args: "/system/bin/logd", startTime: at });
    processes.spawn({ ppid: 1, uid: 1000, name: "servicemanager", args: "/system/bin/servicemanager", startTime: at });
    processes.spawn({ ppid: 1, uid: 1000, name: "surfaceflinger", args: "/system/bin/surfaceflinger", startTime: at });
    const zygote = root("zygote64", "zygote64");
    processes.spawn({ ppid: 1, uid: 2000, name: "adbd", args: "/apex/com.android.adbd/bin/adbd --root_seclabel=u:r:su:s0", startTime: at });
    processes.spawn({ ppid: zygote.pid, uid: 1000, name: "system_server", args: "system_server", startTime: at });
    for (const name of ["com.android.systemui", launcherApp.packageName]) {
      processes.spawn({ ppid: zygote.pid, uid: this.packages.get(name)?.uid ?? 1000, name, args: name, packageName: name, startTime: at });
    }
  }

  /** Kernel boot id (a UUID); changes on every boot. */
  get bootId(): string {
    return this.currentBootId;
  }

  /** Aborted when this boot ends: what runs detached (nohup jobs) dies with it. */
  get bootSignal(): AbortSignal {
    return this.boot.signal;
  }

  /** Starts a new boot: fresh boot id, adbd back to non-root. */
  reboot(): string {
    this.boot.abort();
    this.boot = new AbortController();
    this.currentBootId = randomUUID();
    this.adbdRoot = false;
    for (const process of this.processes.list()) {
      process.onSignal?.(9);
      this.processes.exit(process.pid);
    }
    this.bootProcesses();
    this.log.clear();
    this.screen.home();
    this.display.screenOn = true;
    this.screen.changed();
    return this.currentBootId;
  }

  /** Who adbd's shells run as. */
  get shellCaller(): Caller {
    return this.adbdRoot ? ROOT : SHELL;
  }

  /** Content of a file as adbd's shell user may read it, or undefined. */
  readFile(path: string): Buffer | undefined {
    try {
      return this.fs.readFile(path, this.shellCaller);
    } catch {
      return undefined;
    }
  }
}
