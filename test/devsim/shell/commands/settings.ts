import { isNamespace } from "../../device/settings-store.js";
import type { ShellCommand } from "../command.js";

/** `settings get|put|delete|list NAMESPACE [KEY [VALUE]]`; unset keys read as `null`. */
export const settingsCommand: ShellCommand = async (ctx) => {
  const args = [...ctx.args];
  const user = args.indexOf("--user");
  if (user >= 0) args.splice(user, 2);
  const [verb, namespace, key, ...value] = args;
  const store = ctx.device.settings;
  if (!isNamespace(namespace) || verb === undefined) {
    await ctx.stderr.write("Invalid namespace\nusage:  settings [--user <USER_ID> | current] get namespace key\n");
    return 255;
  }
  switch (verb) {
    case "get":
      await ctx.stdout.write(`${(key !== undefined ? store.get(namespace, key) : undefined) ?? "null"}\n`);
      return 0;
    case "put":
      if (key === undefined || value.length === 0) {
        await ctx.stderr.write("Bad arguments\n");
        return 255;
      }
      store.put(namespace, key, value[0]!);
      return 0;
    case "delete":
      await ctx.stdout.write(`Deleted ${key !== undefined && store.delete(namespace, key) ? 1 : 0} rows\n`);
      return 0;
    case "list":
      await ctx.stdout.write(store.list(namespace).map(([k, v]) => `${k}=${v}\n`).join(""));
      return 0;
    default:
      await ctx.stderr.write(`Invalid command: ${verb}\n`);
      return 255;
  }
};
