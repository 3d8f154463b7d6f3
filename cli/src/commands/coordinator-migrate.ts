import { join } from "node:path";
import { defaultFarmHome } from "@farm/shared/paths";
import { ensurePrivateDir } from "@farm/shared/secure-file";
import { isPostgresUrl } from "@farm/coordinator/db/database";
import { migrateFarmDatabase } from "@farm/coordinator/db/migrate-database";
import type { coordinatorMigrateOptions } from "../tree/service-commands.js";
import type { Action } from "../tree/spec.js";

/** `farm coordinator migrate`: the schema step of an upgrade, on its own. */
export const migrateCoordinator: Action<typeof coordinatorMigrateOptions> = async ({ opts, ctx }) => {
  const dataDir = opts.dataDir ?? join(defaultFarmHome(ctx.env), "coordinator");
  if (!opts.database || !isPostgresUrl(opts.database)) await ensurePrivateDir(dataDir);
  const report = await migrateFarmDatabase(opts.database, dataDir);
  ctx.printer.result({ ...report }, () =>
    report.applied.length === 0
      ? `${report.where}: schema is current`
      : `${report.where}: applied ${report.applied.length} migration(s): ${report.applied.join(", ")}`);
  return 0;
};
