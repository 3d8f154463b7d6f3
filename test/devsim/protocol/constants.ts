// Wire constants of the adb transport protocol (see adb-wire-protocol.md §1).

/** Packet command words: four ASCII bytes read as a little-endian uint32. */
export const Command = {
  CNXN: 0x4e584e43,
  AUTH: 0x48545541,
  OPEN: 0x4e45504f,
  OKAY: 0x59414b4f,
  WRTE: 0x45545257,
  CLSE: 0x45534c43,
  SYNC: 0x434e5953,
  STLS: 0x534c5453,
} as const;

export type CommandName = keyof typeof Command;

/** Oldest protocol version: every packet carries a payload checksum. */
export const VERSION_MIN = 0x01000000;
/** Current version: senders leave the checksum at 0. */
export const VERSION_SKIP_CHECKSUM = 0x01000001;

/** adbd's (and adb 29's) max payload: 1 MiB. */
export const MAX_PAYLOAD = 1024 * 1024;
/** CNXN/AUTH payloads must stay below the legacy limit. */
export const MAX_PAYLOAD_V1 = 4096;

export const HEADER_SIZE = 24;

const names = new Map<number, CommandName>(
  Object.entries(Command).map(([name, value]) => [value, name as CommandName]),
);

/** Readable name of a command word, e.g. for debug logs. */
export function commandName(command: number): string {
  return names.get(command) ?? `0x${command.toString(16).padStart(8, "0")}`;
}
