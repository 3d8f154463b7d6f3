import { randomBytes } from "node:crypto";
import { AID, ROOT } from "../fs/caller.js";
import type { FileSystem } from "../fs/file-system.js";
import type { AppModel } from "../screen/screen-spec.js";

/** An installed package as PackageManager knows it. */
export interface InstalledPackage {
  name: string;
  uid: number;
  label: string;
  versionCode: number;
  versionName: string;
  debuggable: boolean;
  system: boolean;
  /** Path of base.apk (what `pm path` prints). */
  apkPath: string;
  firstInstallTime: number;
  /** Screens, if the app can be shown. */
  model?: AppModel | undefined;
}

/** What an APK declares; devsim APKs carry it as JSON (see sim-apk.ts). */
export interface PackageManifest {
  name: string;
  label?: string;
  versionCode?: number;
  versionName?: string;
  debuggable?: boolean;
  system?: boolean;
  /** A launcher activity (e.g. `.MainActivity`): the app gets a screen, an icon on the home screen, and starts from `monkey`. */
  mainActivity?: string;
}

const SYSTEM_PACKAGES = [
  "android",
  "com.android.systemui",
  "com.android.shell",
  "com.android.phone",
  "com.android.providers.settings",
  "com.android.vending",
  "com.google.android.gms",
  "com.android.chrome",
];

/**
 * Installed packages, each with a uid, an APK under /data/app and a private
 * data directory /data/data/PKG (mode 0700, owned by the app's uid) — only
 * the app itself (run-as) or root can look inside.
 */
export class PackageManager {
  private readonly packages = new Map<string, InstalledPackage>();
  private nextUid = AID.APP_START + 100;

  constructor(private readonly fs: FileSystem) {
    for (const name of SYSTEM_PACKAGES) this.install({ name, system: true }, undefined);
  }

  list(): InstalledPackage[] {
    return [...this.packages.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  get(name: string): InstalledPackage | undefined {
    return this.packages.get(name);
  }

  /** Installs or replaces (keeping uid and data, like `pm install -r`). */
  install(manifest: PackageManifest, model: AppModel | undefined, apk: Buffer = Buffer.alloc(0)): InstalledPackage {
    const existing = this.packages.get(manifest.name);
    const uid = existing?.uid ?? (manifest.system && manifest.name === "android" ? AID.SYSTEM : this.nextUid++);
    const dir = `/data/app/~~${randomBytes(8).toString("base64url")}/${manifest.name}-${randomBytes(8).toString("base64url")}`;
    if (existing) this.fs.remove(existing.apkPath.replace(/\/[^/]+\/base\.apk$/, ""), ROOT, { recursive: true });
    this.fs.mkdir(dir, ROOT, { parents: true, mode: 0o755, uid: AID.SYSTEM, gid: AID.SYSTEM });
    this.fs.writeFile(`${dir}/base.apk`, apk, ROOT, { mode: 0o644 });
    const data = `/data/data/${manifest.name}`;
    if (!this.fs.exists(data, ROOT)) {
      this.fs.mkdir(data, ROOT, { mode: 0o700, uid, gid: uid });
      for (const sub of ["cache", "code_cache", "files", "shared_prefs"]) this.fs.mkdir(`${data}/${sub}`, ROOT, { mode: 0o771, uid, gid: uid });
    }
    const installed: InstalledPackage = {
      name: manifest.name,
      uid,
      label: manifest.label ?? model?.label ?? manifest.name,
      versionCode: manifest.versionCode ?? 1,
      versionName: manifest.versionName ?? "1.0",
      debuggable: manifest.debuggable ?? false,
      system: manifest.system ?? false,
      apkPath: `${dir}/base.apk`,
      firstInstallTime: existing?.firstInstallTime ?? Date.now(),
      model: model ?? existing?.model,
    };
    this.packages.set(manifest.name, installed);
    return installed;
  }

  uninstall(name: string): boolean {
    const found = this.packages.get(name);
    if (!found || found.system) return false;
    this.fs.remove(found.apkPath.replace(/\/[^/]+\/base\.apk$/, ""), ROOT, { recursive: true });
    this.fs.remove(`/data/data/${name}`, ROOT, { recursive: true });
    this.packages.delete(name);
    return true;
  }

  /** `pm clear`: empties the app's data directory. */
  clear(name: string): boolean {
    const found = this.packages.get(name);
    if (!found) return false;
    const data = `/data/data/${name}`;
    for (const entry of this.fs.readdir(data, ROOT)) this.fs.remove(`${data}/${entry.name}`, ROOT, { recursive: true });
    for (const sub of ["cache", "code_cache"]) this.fs.mkdir(`${data}/${sub}`, ROOT, { mode: 0o771, uid: found.uid, gid: found.uid });
    return true;
  }
}
