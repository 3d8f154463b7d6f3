import { userName } from "../../fs/caller.js";
import type { ShellCommand } from "../command.js";

/** `id` and `whoami`: who the shell runs as (shell, root after adb root, the app under run-as). */
export const idCommand: ShellCommand = async (ctx) => {
  const { uid, gids } = ctx.caller;
  const [gid = uid, ...rest] = gids;
  const groups = [gid, ...rest].map((g) => `${g}(${userName(g)})`).join(",");
  await ctx.stdout.write(`uid=${uid}(${userName(uid)}) gid=${gid}(${userName(gid)}) groups=${groups} context=u:r:${uid === 0 ? "su" : uid >= 10000 ? "untrusted_app" : "shell"}:s0\n`);
  return 0;
};

export const whoamiCommand: ShellCommand = async (ctx) => {
  await ctx.stdout.write(`${userName(ctx.caller.uid)}\n`);
  return 0;
};
