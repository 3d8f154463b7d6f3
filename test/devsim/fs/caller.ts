/** Who performs a file operation: Linux uid and supplementary groups. */
export interface Caller {
  readonly uid: number;
  readonly gids: readonly number[];
}

export const AID = {
  ROOT: 0,
  SYSTEM: 1000,
  SHELL: 2000,
  SDCARD_RW: 1015,
  EVERYBODY: 9997,
  APP_START: 10000,
} as const;

export const ROOT: Caller = { uid: AID.ROOT, gids: [AID.ROOT] };

/** adbd's shell user: uid 2000 with the groups that reach shared storage. */
export const SHELL: Caller = { uid: AID.SHELL, gids: [AID.SHELL, 1004, 1007, 1011, AID.SDCARD_RW, 1028, 3001, 3002, 3003, 3006, AID.EVERYBODY] };

/** An app's own uid (what `run-as` switches to). */
export function appCaller(uid: number): Caller {
  return { uid, gids: [uid, 3003, AID.EVERYBODY] };
}

/** Names for ls -l / ps, like Android's passwd entries. */
export function userName(uid: number): string {
  if (uid === 0) return "root";
  if (uid === AID.SYSTEM) return "system";
  if (uid === AID.SHELL) return "shell";
  if (uid === AID.SDCARD_RW) return "sdcard_rw";
  if (uid === AID.EVERYBODY) return "everybody";
  if (uid >= AID.APP_START && uid < 20000) return `u0_a${uid - AID.APP_START}`;
  return String(uid);
}
