import { parseSimApk } from "../../device/sim-apk.js";
import { installedAppModel } from "../../screen/apps/installed-app.js";
import { FsError } from "../../fs/fs-error.js";
import type { ShellCommand } from "../command.js";
import { pathOf } from "./file-args.js";

const FEATURES = ["android.hardware.camera", "android.hardware.touchscreen", "android.hardware.wifi", "android.hardware.screen.portrait", "android.software.webview"];

/** `pm list packages|features`, `pm path`, `pm install [-r] PATH`, `pm uninstall`, `pm clear`. */
export const pmCommand: ShellCommand = async (ctx) => {
  const [sub, ...rest] = ctx.args;
  const packages = ctx.device.packages;
  const operands = rest.filter((arg) => !arg.startsWith("-"));
  switch (sub) {
    case "list": {
      const what = operands[0];
      if (what === "features") {
        await ctx.stdout.write(FEATURES.map((f) => `feature:${f}\n`).join(""));
        return 0;
      }
      if (what !== "packages") {
        await ctx.stderr.write(`Error: unknown list type '${what ?? ""}'\n`);
        return 1;
      }
      const filter = operands[1] ?? "";
      const lines = packages
        .list()
        .filter((p) => p.name.includes(filter))
        .filter((p) => !rest.includes("-3") || !p.system)
        .filter((p) => !rest.includes("-s") || p.system)
        .map((p) => (rest.includes("-f") ? `package:${p.apkPath}=${p.name}` : `package:${p.name}`) + (rest.includes("-U") ? ` uid:${p.uid}` : ""));
      if (lines.length > 0) await ctx.stdout.write(`${lines.join("\n")}\n`);
      return 0;
    }
    case "path": {
      const found = operands[0] === undefined ? undefined : packages.get(operands[0]);
      if (!found) return 1;
      await ctx.stdout.write(`package:${found.apkPath}\n`);
      return 0;
    }
    case "install": {
      const file = operands[operands.length - 1];
      if (file === undefined) {
        await ctx.stderr.write("Error: must either specify a package size or an APK file\n");
        return 1;
      }
      let bytes: Buffer;
      try {
        bytes = ctx.device.fs.readFile(pathOf(ctx, file), ctx.caller);
      } catch (error) {
        if (!(error instanceof FsError)) throw error;
        await ctx.stderr.write(`Error: Unable to open file: ${file}\nConsider using a file under /data/local/tmp/\n`);
        return 1;
      }
      const manifest = parseSimApk(bytes);
      if (!manifest) {
        await ctx.stdout.write(`Failure [INSTALL_PARSE_FAILED_NOT_APK: Failed to parse ${file}: Failed to load asset path ${file}]\n`);
        return 1;
      }
      // Since Android 7, pm replaces an installed package with or without -r.
      packages.install(manifest, manifest.mainActivity ? installedAppModel({ ...manifest, mainActivity: manifest.mainActivity }) : undefined, bytes);
      await ctx.stdout.write("Success\n");
      return 0;
    }
    case "uninstall": {
      const name = operands[0];
      if (name !== undefined) {
        const process = ctx.device.appProcess(name);
        if (process && packages.get(name) && !packages.get(name)!.system) ctx.device.processes.exit(process.pid);
      }
      // A package the uninstallRefused fault names stays, as on a phone whose device admin blocks it.
      const refused = name !== undefined && (ctx.device.faults.current.uninstallRefused ?? []).includes(name);
      const ok = name !== undefined && !refused && packages.uninstall(name);
      await ctx.stdout.write(ok ? "Success\n" : "Failure [DELETE_FAILED_INTERNAL_ERROR]\n");
      return ok ? 0 : 1;
    }
    case "clear": {
      const name = operands[0];
      if (name !== undefined) {
        const process = ctx.device.appProcess(name);
        if (process) ctx.device.processes.exit(process.pid);
      }
      const ok = name !== undefined && packages.clear(name);
      await ctx.stdout.write(ok ? "Success\n" : "Failed\n");
      return ok ? 0 : 1;
    }
    default:
      await ctx.stderr.write(sub === undefined ? "usage: pm path|list|install|uninstall|clear ...\n" : `Unknown command: ${sub}\n`);
      return 1;
  }
};
