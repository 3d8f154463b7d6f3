import { create } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import { BoundedQueue } from "@farm/shared/bounded-queue";
import { Errors, farmError } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import { AgentLogcatService, ServeLogcatRequestSchema, type ServeLogcatRequest, type ServeLogcatResponse } from "@farm/shared/gen/farm/v1/agent_logcat_service_pb";
import type { AdbServerAddress } from "../adb/adb-client.js";
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
 * The live logcats this agent streams, by stream id. Each follows its
 * phone's log and sends on its own ServeLogcat call until the coordinator
 * ends the call (the last viewer left), the agent stops, or the phone goes
 * away. Nothing here changes the phone: no lock is taken.
 */
export class LiveLogcats {
  private readonly streams = new Map<string, AbortController>();

  constructor(private readonly opts: { adb: AdbServerAddress; serve: ServeLogcat; log: Logger }) {}

  start(streamId: string, serial: string): void {
    if (this.streams.has(streamId)) throw farmError(Errors.ALREADY_EXISTS, `live logcat ${streamId} is already streaming`, "stream_id");
    if (this.streams.size >= MAX_LIVE_LOGCATS) throw farmError(Errors.RESOURCE_EXHAUSTED, `this agent already streams ${this.streams.size} live logcats`, "stream_id");
    const stop = new AbortController();
    this.streams.set(streamId, stop);
    void this.run(streamId, serial, stop).finally(() => {
      if (this.streams.get(streamId) === stop) this.streams.delete(streamId);
    });
  }

  get size(): number {
    return this.streams.size;
  }

  stopAll(): void {
    for (const s of this.streams.values()) s.abort();
  }

  private async run(streamId: string, serial: string, stop: AbortController): Promise<void> {
    // Bounded: a slow coordinator slows the read instead of filling memory.
    const outgoing = new BoundedQueue<ServeLogcatRequest>(QUEUED_BATCHES);
    stop.signal.addEventListener("abort", () => outgoing.close(), { once: true });
    await outgoing.push(create(ServeLogcatRequestSchema, { kind: { case: "streamId", value: streamId } }));
    const call = (async () => {
      try {
        for await (const _ of this.opts.serve(outgoing, stop.signal)) {
          // Nothing is sent this way.
        }
      } catch {
        // The coordinator went away, or we stopped.
      } finally {
        stop.abort();
      }
    })();
    try {
      await runLogcat({
        adb: this.opts.adb,
        serial,
        signal: stop.signal,
        emit: async (lines) => void (await outgoing.push(create(ServeLogcatRequestSchema, { kind: { case: "lines", value: { lines } } }))),
      });
    } catch (err) {
      if (!stop.signal.aborted) this.opts.log.warn("live logcat ended", { serial, streamId, error: (err as Error).message });
    } finally {
      stop.abort();
      outgoing.close();
      await call;
    }
  }
}
