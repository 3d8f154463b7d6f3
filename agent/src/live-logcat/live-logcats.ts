import { create } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import type { Logger } from "@farm/shared/log";
import { AgentLogcatService, ServeLogcatRequestSchema, type ServeLogcatRequest, type ServeLogcatResponse } from "@farm/shared/gen/farm/v1/agent_logcat_service_pb";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { PhoneStreams } from "../phone-streams/phone-streams.js";
import { runLogcat } from "./logcat-source.js";

/** The coordinator's AgentLogcatService.ServeLogcat (tests stand in for it). */
export type ServeLogcat = (requests: AsyncIterable<ServeLogcatRequest>, signal: AbortSignal) => AsyncIterable<ServeLogcatResponse>;

export function serveLogcatOver(transport: Transport): ServeLogcat {
  const client = createClient(AgentLogcatService, transport);
  return (requests, signal) => client.serveLogcat(requests, { signal });
}

/** Live logcats one agent streams at once (a coordinator asks for one per phone). */
export const MAX_LIVE_LOGCATS = 32;
/** Batches waiting for the coordinator before the phone's log is no longer read. */
const QUEUED_BATCHES = 8;

/**
 * The live logcats this agent streams, by stream id: each follows its phone's
 * log and sends batches of lines on its own ServeLogcat call
 * (phone-streams.ts: until the coordinator ends the call, the agent stops,
 * or the phone goes away).
 */
export class LiveLogcats extends PhoneStreams<ServeLogcatRequest> {
  constructor(opts: { adb: AdbServerAddress; serve: ServeLogcat; log: Logger }) {
    super({
      noun: "live logcat",
      max: MAX_LIVE_LOGCATS,
      queued: QUEUED_BATCHES,
      serve: opts.serve,
      log: opts.log,
      opening: (streamId) => create(ServeLogcatRequestSchema, { kind: { case: "streamId", value: streamId } }),
      produce: (serial, send, signal) => runLogcat({ adb: opts.adb, serial, signal, emit: (lines) => send(create(ServeLogcatRequestSchema, { kind: { case: "lines", value: { lines } } })) }),
    });
  }
}
