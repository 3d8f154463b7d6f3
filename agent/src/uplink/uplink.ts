import { hostname } from "node:os";
import { create } from "@bufbuild/protobuf";
import { createClient, type Transport } from "@connectrpc/connect";
import { AsyncQueue } from "@farm/shared/async-queue";
import { Backoff } from "@farm/shared/backoff";
import { Errors, farmError, toErrorReport } from "@farm/shared/errors";
import type { Logger } from "@farm/shared/log";
import { FARM_VERSION, PROTOCOL_VERSION } from "@farm/shared/version";
import { AgentService, AttachRequestSchema, type AgentCall, type AgentCallResult, type AttachRequest, type DeviceEvent as DeviceEventMessage, type DeviceReport } from "@farm/shared/gen/farm/v1/agent_service_pb";
import type { DeviceEvent, DeviceWatcher } from "../devices/device-watcher.js";
import { stageTrace } from "@farm/shared/stage-trace";

export interface UplinkOptions {
  coordinatorUrl: string;
  transport: Transport;
  agentId: string;
  name: string;
  heartbeatIntervalMs: number;
  watcher: DeviceWatcher;
  log: Logger;
  backoff?: { initialMs: number; maxMs: number };
  /** Told whenever the attached state changes (tests and status output). */
  onStateChange?: (attached: boolean) => void;
  /** Runs a routed call; its result goes back on the same stream. `cancelled` aborts when the coordinator cancels it. */
  onCall?: (call: AgentCall, cancelled: AbortSignal) => Promise<AgentCallResult>;
  /** Adds what the watcher does not know (unresolved actions) to each device report sent. */
  decorate?: (report: DeviceReport) => DeviceReport;
}

/**
 * The agent's control stream to the coordinator: hello, full inventory,
 * device changes as they happen, and heartbeats. Reconnects forever with
 * exponential backoff and jitter, re-sending the full inventory each time.
 */
export class Uplink {
  private readonly backoff: Backoff;
  private readonly aborter = new AbortController();
  private attachedNow = false;
  private current: AsyncQueue<AttachRequest> | undefined;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;

  constructor(private readonly opts: UplinkOptions) {
    this.backoff = new Backoff(opts.backoff ?? { initialMs: 250, maxMs: 15_000 });
  }

  get attached(): boolean {
    return this.attachedNow;
  }

  start(): void {
    this.loop ??= this.run();
  }

  private stopping = false;

  /**
   * Ends the control stream: the request side is half-closed first, so
   * results already queued (a drain's own answer) still reach the
   * coordinator; after graceMs the stream is cut.
   */
  async stop(graceMs = 2_000): Promise<void> {
    this.stopping = true;
    this.current?.close();
    const cut = setTimeout(() => this.aborter.abort(), graceMs);
    this.wake?.();
    await this.loop;
    clearTimeout(cut);
    this.aborter.abort();
  }

  private drainReason = "";

  /** Tells the coordinator (now, and in every later hello) that this agent drains. */
  setDraining(reason: string): void {
    this.drainReason = reason;
    if (this.attachedNow) this.current?.push(create(AttachRequestSchema, { kind: { case: "draining", value: { reason } } }));
  }

  /** Sends a device event if attached (history is also kept on disk). */
  sendEvent(e: DeviceEventMessage): void {
    if (this.attachedNow) this.current?.push(create(AttachRequestSchema, { kind: { case: "deviceEvent", value: e } }));
  }

  private setAttached(v: boolean): void {
    if (this.attachedNow === v) return;
    this.attachedNow = v;
    this.opts.onStateChange?.(v);
  }

  private async run(): Promise<void> {
    const client = createClient(AgentService, this.opts.transport);
    while (!this.aborter.signal.aborted && !this.stopping) {
      try {
        await this.session(client);
        if (this.stopping) break;
        this.opts.log.warn("coordinator closed the control stream");
      } catch (err) {
        if (this.aborter.signal.aborted || this.stopping) break;
        const r = toErrorReport(err);
        this.opts.log.warn("control stream failed", { code: r.code, error: r.message });
      } finally {
        this.setAttached(false);
      }
      if (this.aborter.signal.aborted || this.stopping) break;
      const delay = this.backoff.next();
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, delay);
        this.wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
    }
  }

  /** Sends a device report outside the watcher's own changes (e.g. its unresolved actions changed). */
  sendDeviceReport(report: DeviceReport): void {
    if (!this.attachedNow) return; // the next attach sends the full inventory
    this.current?.push(changeMessage({ kind: "upsert", report: this.opts.decorate ? this.opts.decorate(report) : report }));
  }

  private async session(client: ReturnType<typeof createClient<typeof AgentService>>): Promise<void> {
    const out = new AsyncQueue<AttachRequest>();
    const sessionAbort = new AbortController();
    const onStop = () => sessionAbort.abort();
    this.aborter.signal.addEventListener("abort", onStop, { once: true });
    let heartbeat: NodeJS.Timeout | undefined;
    let unsubscribe: (() => void) | undefined;
    // Calls of this stream still running, by command id: what a cancel from the coordinator aborts.
    const running = new Map<string, AbortController>();
    out.push(
      create(AttachRequestSchema, {
        kind: {
          case: "hello",
          value: {
            agentId: this.opts.agentId,
            name: this.opts.name,
            hostname: hostname(),
            protocolVersion: PROTOCOL_VERSION,
            agentVersion: FARM_VERSION,
            adbVersion: this.opts.watcher.adbVersion,
            heartbeatIntervalMs: this.opts.heartbeatIntervalMs,
            drainReason: this.drainReason,
          },
        },
      }),
    );
    try {
      for await (const res of client.attach(out, { signal: sessionAbort.signal })) {
        if (res.kind.case === "call") {
          const run = this.opts.onCall;
          if (!run) continue;
          // Results of a stream that has since ended are dropped: the caller
          // has already been told the outcome is unknown.
          const commandId = res.kind.value.commandId;
          stageTrace?.mark(commandId, "ag.in");
          const cancel = new AbortController();
          running.set(commandId, cancel);
          void run(res.kind.value, cancel.signal).then((r) => {
            running.delete(commandId);
            stageTrace?.mark(r.commandId, "ag.out");
            out.push(create(AttachRequestSchema, { kind: { case: "callResult", value: r } }));
          });
          continue;
        }
        if (res.kind.case === "cancel") {
          // A call that has answered already, or was never seen, has nothing to stop.
          const id = res.kind.value.commandId;
          running.get(id)?.abort(farmError(Errors.CALL_CANCELLED, "the caller cancelled the call (or went away)"));
          running.delete(id);
          continue;
        }
        if (res.kind.case !== "helloAccepted" || this.attachedNow) continue;
        this.current = out;
        this.backoff.reset();
        // Subscribe before the snapshot so no change falls between them.
        const decorate = this.opts.decorate ?? ((r: DeviceReport) => r);
        unsubscribe = this.opts.watcher.onEvent((e) => out.push(changeMessage(e.kind === "upsert" ? { kind: "upsert", report: decorate(e.report) } : e)));
        out.push(
          create(AttachRequestSchema, {
            kind: { case: "inventory", value: { devices: this.opts.watcher.snapshot().map(decorate) } },
          }),
        );
        let sequence = 0n;
        heartbeat = setInterval(() => {
          sequence += 1n;
          out.push(create(AttachRequestSchema, { kind: { case: "heartbeat", value: { sequence } } }));
        }, this.opts.heartbeatIntervalMs);
        this.setAttached(true);
        this.opts.log.info("attached to coordinator", {
          coordinator: this.opts.coordinatorUrl,
          coordinatorVersion: res.kind.value.coordinatorVersion,
        });
      }
    } finally {
      clearInterval(heartbeat);
      unsubscribe?.();
      out.close();
      this.aborter.signal.removeEventListener("abort", onStop);
    }
  }
}

function changeMessage(e: DeviceEvent): AttachRequest {
  return create(AttachRequestSchema, {
    kind: {
      case: "deviceChange",
      value: { kind: e.kind === "upsert" ? { case: "upsert", value: e.report } : { case: "removedSerial", value: e.serial } },
    },
  });
}
