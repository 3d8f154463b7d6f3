import type { Session as SessionMessage, SessionStep } from "@farm/shared/gen/farm/v1/session_service_pb";
import { SessionService } from "@farm/shared/gen/farm/v1/session_service_pb";
import type { Device } from "./device.js";
import { endSessionCall, sessionStepsCall, type SessionEnd } from "./session-calls.js";
import { farmCall } from "./to-farm-error.js";
import type { Wire } from "./wire.js";

/**
 * A recorded run on a leased phone (`farm session start`): every action
 * through `device` is a step of its timeline (before and after
 * screenshots, the action, its result), as `farm session show ID` lists.
 */
export class Session {
  /** The leased phone, its actions recorded in this session. */
  readonly device: Device;

  constructor(
    private readonly wire: Wire,
    readonly info: SessionMessage,
    device: Device,
  ) {
    this.device = device.inSession(info.sessionId);
  }

  get sessionId(): string {
    return this.info.sessionId;
  }

  /** The timeline so far, oldest step first. */
  steps(opts: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<SessionStep[]> {
    return farmCall(() => sessionStepsCall(this.wire.client(SessionService), this.sessionId, this.wire.options({}, opts)));
  }

  /** Ends it as passed or failed (releasing the lease first ends it as lease-ended). */
  end(status: SessionEnd, opts: { timeoutMs?: number } = {}): Promise<SessionMessage | undefined> {
    return farmCall(() => endSessionCall(this.wire.client(SessionService), this.sessionId, status, this.wire.options({}, opts)));
  }
}
