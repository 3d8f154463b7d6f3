import type { DeviceState } from "../device/device-state.js";
import { FsError } from "../fs/fs-error.js";
import { S_IFLNK, S_IFMT, resolvePath, type StatInfo } from "../fs/file-system.js";
import type { ServiceStream } from "../transport/adb-stream.js";
import type { Service } from "./service.js";
import { StreamReader } from "./stream-reader.js";
import { SYNC_DATA_MAX, SYNC_DATA_MAX_SEND, SYNC_PATH_MAX, SyncId, encodeDent, encodeDnt2, encodeListDone, encodeStatV1, encodeStatV2, syncFail, syncHeader } from "./sync-protocol.js";

/**
 * `sync:` — adb's file service (SYNC.TXT): any number of STAT/STA2/LST2/
 * LIST/LIS2/RECV/SEND requests until QUIT or the host closes the stream.
 */
export const syncService: Service = {
  prefixes: ["sync:"],
  open(request) {
    if (request.name !== "sync:") return undefined;
    return (stream) => runSync(stream, request.device.state);
  },
};

async function runSync(stream: ServiceStream, state: DeviceState): Promise<void> {
  const reader = new StreamReader(stream);
  for (;;) {
    const header = await reader.read(8);
    if (!header) return;
    const id = header.toString("latin1", 0, 4);
    const length = header.readUInt32LE(4);
    if (id === SyncId.QUIT) return;
    if (length > SYNC_PATH_MAX) {
      await stream.write(syncFail(`path too long: ${length}`));
      return;
    }
    const pathBytes = await reader.read(length);
    if (!pathBytes) return;
    const path = pathBytes.toString("utf8");
    switch (id) {
      case SyncId.STAT:
        await stream.write(encodeStatV1(tryStat(state, path, false).stat));
        break;
      case SyncId.STA2:
      case SyncId.LST2: {
        const { stat, errno } = tryStat(state, path, id === SyncId.STA2);
        await stream.write(encodeStatV2(id, stat, errno));
        break;
      }
      case SyncId.LIST:
      case SyncId.LIS2:
        await list(stream, state, path, id === SyncId.LIS2);
        break;
      case SyncId.RECV:
        if (!(await receive(stream, state, path))) return;
        break;
      case SyncId.SEND:
        if (!(await send(stream, reader, state, path))) return;
        break;
      default:
        await stream.write(syncFail(`unknown command ${JSON.stringify(id)}`));
        return;
    }
  }
}

function tryStat(state: DeviceState, path: string, follow: boolean): { stat: StatInfo | undefined; errno: number } {
  try {
    return { stat: state.fs.stat(path, state.shellCaller, follow), errno: 0 };
  } catch (error) {
    if (error instanceof FsError) return { stat: undefined, errno: error.errno };
    throw error;
  }
}

async function list(stream: ServiceStream, state: DeviceState, path: string, v2: boolean): Promise<void> {
  const caller = state.shellCaller;
  try {
    const entries = [
      { name: ".", stat: state.fs.stat(path, caller) },
      { name: "..", stat: state.fs.stat(resolvePath(path, ".."), caller) },
      ...state.fs.readdir(path, caller),
    ];
    for (const entry of entries) await stream.write(v2 ? encodeDnt2(entry.name, entry.stat) : encodeDent(entry.name, entry.stat));
  } catch (error) {
    // adbd ends an unreadable listing with just DONE.
    if (!(error instanceof FsError)) throw error;
  }
  await stream.write(encodeListDone(v2));
}

/** RECV: DATA chunks then DONE; false when the session must end (failure or vanish). */
async function receive(stream: ServiceStream, state: DeviceState, path: string): Promise<boolean> {
  let data: Buffer;
  try {
    data = state.fs.readFile(path, state.shellCaller);
  } catch (error) {
    if (!(error instanceof FsError)) throw error;
    await stream.write(syncFail(`open failed: ${error.message}`));
    return false;
  }
  for (let offset = 0; offset < data.length; offset += SYNC_DATA_MAX_SEND) {
    if (stream.closed) return false;
    const chunk = data.subarray(offset, offset + SYNC_DATA_MAX_SEND);
    const allowed = state.faults.remainingBeforeVanish();
    if (allowed < chunk.length) {
      // Vanish mid-transfer: the host gets a DATA header promising more than arrives.
      await stream.write(Buffer.concat([syncHeader(SyncId.DATA, chunk.length), chunk.subarray(0, allowed)]));
      state.faults.countTransfer(chunk.length);
      return false;
    }
    state.faults.countTransfer(chunk.length);
    // Two writes, no copy: the stream coalesces them into WRTEs anyway.
    void stream.write(syncHeader(SyncId.DATA, chunk.length));
    await stream.write(chunk);
  }
  await stream.write(syncHeader(SyncId.DONE, 0));
  return true;
}

/** SEND `path,mode` + DATA… + DONE(mtime); one OKAY or FAIL at the end. */
async function send(stream: ServiceStream, reader: StreamReader, state: DeviceState, spec: string): Promise<boolean> {
  const comma = spec.lastIndexOf(",");
  const path = comma >= 0 ? spec.slice(0, comma) : spec;
  const mode = comma >= 0 ? Number(spec.slice(comma + 1)) : 0o100644;
  const caller = state.shellCaller;
  let failure: string | undefined;
  const chunks: Buffer[] = [];
  let size = 0;

  try {
    // adbd creates missing parent directories (secure_mkdirs).
    const parent = resolvePath(path, "..");
    if (!state.fs.exists(parent, caller)) state.fs.mkdir(parent, caller, { parents: true, mode: 0o771 });
  } catch (error) {
    if (!(error instanceof FsError)) throw error;
    failure = `secure_mkdirs failed: ${error.message}`;
  }
  if (!failure && (mode & S_IFMT) !== S_IFLNK) {
    try {
      state.fs.openForWrite(path, caller, { mode: mode & 0o777 });
    } catch (error) {
      if (!(error instanceof FsError)) throw error;
      failure = `couldn't create file: ${error.message}`;
    }
  }
  if (failure) await stream.write(syncFail(failure));

  for (;;) {
    const header = await reader.read(8);
    if (!header) return false;
    const id = header.toString("latin1", 0, 4);
    const value = header.readUInt32LE(4);
    if (id === SyncId.DONE) {
      if (failure) return false;
      try {
        const data = Buffer.concat(chunks, size);
        if ((mode & S_IFMT) === S_IFLNK) state.fs.symlink(data.toString(), path, caller);
        else state.fs.writeFile(path, data, caller, { mode: mode & 0o777, mtime: value });
      } catch (error) {
        if (!(error instanceof FsError)) throw error;
        await stream.write(syncFail(`write failed: ${error.message}`));
        return false;
      }
      await stream.write(syncHeader(SyncId.OKAY, 0));
      return true;
    }
    if (id !== SyncId.DATA || value > SYNC_DATA_MAX) {
      // adbd's words for both protocol violations.
      if (!failure) await stream.write(syncFail(id !== SyncId.DATA ? `invalid data message: expected DATA, got ${JSON.stringify(id)}` : "oversize data message"));
      return false;
    }
    const data = await reader.read(value);
    if (!data) return false;
    if (state.faults.countTransfer(data.length)) return false;
    if (failure) continue;
    if (state.fs.isFull()) {
      failure = "write failed: No space left on device";
      await stream.write(syncFail(failure));
      continue;
    }
    chunks.push(data);
    size += data.length;
  }
}
