import { EventEmitter } from "node:events";
import { createHash, randomUUID } from "node:crypto";
import type { JsonValue } from "@bufbuild/protobuf";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import { readPage, type Page, type PageRequest } from "../paging.js";
import type { SessionFilter, SessionRow, SessionState, SessionStore } from "./session-store.js";

export const MAX_NAME_CHARS = 200;
export const MAX_CONTEXT_BYTES = 16 * 1024;
export const MAX_SECRETS = 64;
/** Shorter values would mask ordinary text everywhere. */
export const MIN_SECRET_CHARS = 4;
export const MAX_SECRET_CHARS = 4096;

/** A secret to mask in a session's evidence: its name is stored, its value only held in memory. */
export interface SessionSecret {
  name: string;
  value: string;
}

/** What changed, for live watchers (dashboards). */
export interface SessionEvents {
  /** A session started or ended: the whole row. */
  session: [session: SessionRow];
}

/** The lease a session is started under, already checked to be the caller's (LeaseManager.authorize). */
export interface SessionLease {
  leaseId: string;
  physicalId: string;
  agentId: string;
  serial: string;
}

/** Who ends a session: its owner or an admin may. */
export interface SessionCaller {
  tokenName: string;
  admin: boolean;
}

/**
 * Recorded sessions: one user's run on one phone under one lease. A session
 * ends once: by its owner (passed or failed) or when its lease ends. This
 * class checks no lease itself and listens to nothing: the coordinator
 * hands it the checked lease and tells it when a lease ends.
 */
export class Sessions {
  readonly events = new EventEmitter<SessionEvents>();
  /** Secret values by session, for running sessions only: never written anywhere. */
  private readonly secrets = new Map<string, string[]>();

  constructor(
    private readonly store: SessionStore,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Starts a session. `policyJson` must already be the validated policy
   * (capture-policy); secrets are checked here and kept in memory only.
   */
  start(
    owner: string,
    lease: SessionLease,
    opts: { name: string; context: Record<string, JsonValue>; ocr: boolean; policyJson?: string; secrets?: readonly SessionSecret[] },
  ): SessionRow {
    if (opts.name.length > MAX_NAME_CHARS) throw invalidArgument("name", `name is ${opts.name.length} characters; at most ${MAX_NAME_CHARS} are allowed`);
    const bytes = Buffer.byteLength(JSON.stringify(opts.context), "utf8");
    if (bytes > MAX_CONTEXT_BYTES) throw invalidArgument("context", `context is ${bytes} bytes as JSON; at most ${MAX_CONTEXT_BYTES} are allowed`);
    const secrets = checkSecrets(opts.secrets ?? []);
    const policyJson = opts.policyJson ?? "";
    const row: SessionRow = {
      sessionId: randomUUID(),
      name: opts.name,
      physicalId: lease.physicalId,
      serial: lease.serial,
      agentId: lease.agentId,
      leaseId: lease.leaseId,
      owner,
      status: "running",
      createdAt: this.now(),
      endedAt: null,
      stepCount: 0,
      failedStepCount: 0,
      context: opts.context,
      ocr: opts.ocr,
      policyJson,
      policySha256: policyJson ? createHash("sha256").update(policyJson).digest("hex") : "",
      secretNames: secrets.map((x) => x.name),
    };
    // Stored before the caller learns the id (durable before visible).
    this.store.insert(row);
    if (secrets.length > 0) this.secrets.set(row.sessionId, secrets.map((x) => x.value));
    this.events.emit("session", row);
    return row;
  }

  /** Ends a running session as passed or failed: only its owner or an admin, and only once. */
  end(sessionId: string, status: "passed" | "failed", caller: SessionCaller): SessionRow {
    const row = this.get(sessionId);
    if (!caller.admin && caller.tokenName !== row.owner) {
      throw farmError(Errors.PERMISSION_DENIED, `session ${sessionId} belongs to ${row.owner}; only they or an admin may end it`, "session_id");
    }
    if (row.status !== "running") throw this.ended(row);
    const ended = this.store.end(sessionId, status, this.now());
    // Ended by someone else between the read and the write (its lease, say).
    if (!ended) throw this.ended(this.get(sessionId));
    this.secrets.delete(sessionId);
    this.events.emit("session", ended);
    return ended;
  }

  /** Ends every running session under a lease that ended; returns them. */
  endForLease(leaseId: string): SessionRow[] {
    const ended: SessionRow[] = [];
    for (const row of this.store.running(leaseId)) {
      const e = this.store.end(row.sessionId, "lease_ended", this.now());
      if (!e) continue;
      this.secrets.delete(row.sessionId);
      ended.push(e);
      this.events.emit("session", e);
    }
    return ended;
  }

  /**
   * At start-up: ends running sessions whose lease is no longer active
   * (it ended while the coordinator was down, or before its event was handled).
   */
  settle(activeLeaseIds: ReadonlySet<string>): SessionRow[] {
    const leases = new Set(this.store.running().map((r) => r.leaseId).filter((id) => !activeLeaseIds.has(id)));
    return [...leases].flatMap((id) => this.endForLease(id));
  }

  /**
   * The secret values of a running session. A session that has secrets
   * whose values this process does not hold (the coordinator restarted) is
   * refused: its evidence could not be masked.
   */
  secretsOf(row: SessionRow): string[] {
    if (row.secretNames.length === 0) return [];
    const values = this.secrets.get(row.sessionId);
    if (!values) {
      throw farmError(
        Errors.SESSION_SECRETS_LOST,
        `session ${row.sessionId} masks secrets (${row.secretNames.join(", ")}) whose values this coordinator no longer holds (it restarted); end it and start another`,
        "session_id",
      );
    }
    return values;
  }

  get(sessionId: string): SessionRow {
    if (sessionId === "") throw invalidArgument("session_id", "a session id is required");
    const row = sessionId.length <= 128 ? this.store.get(sessionId) : undefined;
    if (!row) throw farmError(Errors.SESSION_NOT_FOUND, `no session ${sessionId}`, "session_id");
    return row;
  }

  /** One page, newest first by (create time, session id): unique, and fixed once written. */
  listPage(filter: SessionFilter, page: PageRequest): Page<SessionRow> {
    const f = { physicalId: filter.physicalId || undefined, status: filter.status, owner: filter.owner || undefined };
    return readPage(page, { list: "sessions", filter: f }, ["number", "string"] as const, (r: SessionRow) => [r.createdAt, r.sessionId] as const, (after, limit) =>
      this.store.listAfter(f, after, limit),
    );
  }

  private ended(row: SessionRow): Error {
    const when = row.endedAt === null ? "" : ` at ${new Date(row.endedAt).toISOString()}`;
    const why: Record<SessionState, string> = { running: "is running", passed: "ended as passed", failed: "ended as failed", lease_ended: "ended when its lease ended" };
    return farmError(Errors.SESSION_ENDED, `session ${row.sessionId} already ${why[row.status]}${when}`, "session_id");
  }
}

function checkSecrets(secrets: readonly SessionSecret[]): SessionSecret[] {
  if (secrets.length > MAX_SECRETS) throw invalidArgument("secrets", `${secrets.length} secrets; at most ${MAX_SECRETS} are allowed`);
  const names = new Set<string>();
  secrets.forEach((x, i) => {
    if (!/^[A-Za-z_][A-Za-z0-9_]{0,127}$/.test(x.name)) throw invalidArgument(`secrets[${i}].name`, "a secret's name is an environment variable name");
    if (names.has(x.name)) throw invalidArgument(`secrets[${i}].name`, `secret ${x.name} is given twice`);
    names.add(x.name);
    // The value is never echoed back, not even its length.
    if (x.value.length < MIN_SECRET_CHARS || x.value.length > MAX_SECRET_CHARS) {
      throw invalidArgument(`secrets[${i}].value`, `secret ${x.name} must be ${MIN_SECRET_CHARS} to ${MAX_SECRET_CHARS} characters long (a shorter one would mask ordinary text)`);
    }
  });
  return [...secrets];
}
