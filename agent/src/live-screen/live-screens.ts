import { create } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import { BoundedQueue } from "@farm/shared/bounded-queue";
import { Errors, farmError } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import { AgentScreenService, ServeScreenRequestSchema, type ServeScreenRequest, type ServeScreenResponse } from "@farm/shared/gen/farm/v1/agent_screen_service_pb";
import type { ScreenEvent } from "@farm/shared/gen/farm/v1/live_screen_service_pb";
import type { AdbServerAddress } from "../adb/adb-client.js";
import { runScreen } from "./screen-source.js";

/** The coordinator's AgentScreenService.ServeScreen (tests stand in for it). */
export type ServeScreen = (requests: AsyncIterable<ServeScreenRequest>, signal: AbortSignal) => AsyncIterable<ServeScreenResponse>;

export function serveScreenOver(transport: Transport): ServeScreen {
  const client = createClient(AgentScreenService, transport);
  return (requests, signal) => client.serveScreen(requests, { signal });
}

/** Live screens one agent streams at once (one per phone is what a coordinator asks for). */
export const MAX_LIVE_SCREENS = 32;
/** Events waiting for the coordinator before the phone's stream is paused. */
const QUEUED_EVENTS = 8;

/**
 * The live screens this agent streams, by stream id. Each reads its phone
 * and sends on its own ServeScreen call until the coordinator ends the
 * call (the last viewer left), the agent stops, or the phone goes away.
 * Nothing here changes the phone: no lock is taken.
 */
export class LiveScreens {
  private readonly streams = new Map<string, AbortController>();

  constructor(private readonly opts: { adb: AdbServerAddress; serve: ServeScreen; log: Logger }) {}

  start(streamId: string, serial: string): void {
    if (this.streams.has(streamId)) throw farmError(Errors.ALREADY_EXISTS, `live screen ${streamId} is already streaming`, "stream_id");
    if (this.streams.size >= MAX_LIVE_SCREENS) throw farmError(Errors.RESOURCE_EXHAUSTED, `this agent already streams ${this.streams.size} live screens`, "stream_id");
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
    // Bounded: a slow coordinator slows the phone's stream instead of filling memory.
    const outgoing = new BoundedQueue<ServeScreenRequest>(QUEUED_EVENTS);
    stop.signal.addEventListener("abort", () => outgoing.close(), { once: true });
    await outgoing.push(create(ServeScreenRequestSchema, { kind: { case: "streamId", value: streamId } }));
    // The call's end (the coordinator is done with it) stops the phone's stream.
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
    const emit = async (event: ScreenEvent) => void (await outgoing.push(create(ServeScreenRequestSchema, { kind: { case: "event", value: event } })));
    try {
      await runScreen({ adb: this.opts.adb, serial, emit, signal: stop.signal, log: this.opts.log });
    } catch (err) {
      if (!stop.signal.aborted) this.opts.log.warn("live screen ended", { serial, streamId, error: (err as Error).message });
    } finally {
      stop.abort();
      outgoing.close();
      await call;
    }
  }
}
