import { EventEmitter } from "node:events";
import { createHash, randomUUID } from "node:crypto";
import type { JsonValue } from "@bufbuild/protobuf";
import { Errors, farmError, invalidArgument } from "@farm/shared/errors";
import { createRedactor, MIN_SECRET_LENGTH, type Redactor } from "@farm/shared/redaction/redactor";
import { decodePageToken, pageSizeOf, readPage, type Page, type PageRequest } from "../paging.js";
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
 * class listens to nothing: the coordinator hands it the checked lease
 * (which the insert checks again, `underLiveLease`) and tells it when a
 * lease ends.
 */
export class Sessions {
  readonly events = new EventEmitter<SessionEvents>();
  /** Secret values by session, for running sessions only: never written anywhere. */
  private readonly secrets = new Map<string, string[]>();
  /**
   * Starts and lease endings, chained per lease: a session started while
   * its lease ends is announced running before it is announced ended, and
   * its secrets are not kept for a session that has already ended.
   */
  private readonly byLease = new Map<string, Promise<unknown>>();

  /**
   * `underLiveLease`: a start stores its session only while the lease is
   * still active in the database, in the insert's own statement (the
   * coordinator's sessions; a lease checked a moment before may have ended
   * since, through another replica). Without it (tests of this class alone)
   * the lease is taken as checked.
   */
  constructor(
    private readonly store: SessionStore,
    private readonly now: () => number = Date.now,
    private readonly opts: { underLiveLease?: boolean } = {},
  ) {}

  /**
   * Starts a session. `policyJson` must already be the validated policy
   * (capture-policy); secrets are checked here and kept in memory only.
   */
  async start(
    owner: string,
    lease: SessionLease,
    opts: { name: string; context: Record<string, JsonValue>; ocr: boolean; policyJson?: string; secrets?: readonly SessionSecret[] },
  ): Promise<SessionRow> {
    if (opts.name.length > MAX_NAME_CHARS) throw invalidArgument("name", `name is ${opts.name.length} characters; at most ${MAX_NAME_CHARS} are allowed`);
    // PostgreSQL keeps no NUL character in text or jsonb: refused on either database alike.
    if (opts.name.includes("\0")) throw invalidArgument("name", "name contains a NUL character");
    const bytes = Buffer.byteLength(JSON.stringify(opts.context), "utf8");
    if (bytes > MAX_CONTEXT_BYTES) throw invalidArgument("context", `context is ${bytes} bytes as JSON; at most ${MAX_CONTEXT_BYTES} are allowed`);
    if (hasNul(opts.context)) throw invalidArgument("context", "context contains a NUL character");
    const secrets = checkSecrets(opts.secrets ?? []);
    // The session's own name and context are masked before anything keeps or announces them.
    const mask = secretMask(secrets.map((x) => x.value));
    const policyJson = opts.policyJson ?? "";
    const row: SessionRow = {
      sessionId: randomUUID(),
      name: mask ? mask.text(opts.name) : opts.name,
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
      context: mask ? (mask.json(opts.context) as Record<string, JsonValue>) : opts.context,
      ocr: opts.ocr,
      policyJson,
      policySha256: policyJson ? createHash("sha256").update(policyJson).digest("hex") : "",
      secretNames: secrets.map((x) => x.name),
    };
    return this.underLease(lease.leaseId, async () => {
      // Stored before the caller learns the id (durable before visible).
      if (this.opts.underLiveLease) {
        const stored = await this.store.insertUnderLease(row);
        if (stored === "expired") throw farmError(Errors.LEASE_EXPIRED, `lease ${lease.leaseId} expired before the session was stored; acquire a new one`, "lease");
        if (stored === "released") throw farmError(Errors.LEASE_RELEASED, `lease ${lease.leaseId} was released before the session was stored`, "lease");
        if (stored === "unknown") throw farmError(Errors.LEASE_NOT_FOUND, `no lease ${lease.leaseId} is stored`, "lease");
      } else {
        await this.store.insert(row);
      }
      if (secrets.length > 0) this.secrets.set(row.sessionId, secrets.map((x) => x.value));
      this.events.emit("session", row);
      return row;
    });
  }

  /** Ends a running session as passed or failed: only its owner or an admin, and only once. */
  async end(sessionId: string, status: "passed" | "failed", caller: SessionCaller): Promise<SessionRow> {
    const row = await this.get(sessionId);
    if (!caller.admin && caller.tokenName !== row.owner) {
      throw farmError(Errors.PERMISSION_DENIED, `session ${sessionId} belongs to ${row.owner}; only they or an admin may end it`, "session_id");
    }
    if (row.status !== "running") throw this.ended(row);
    // The store ends only a running session: of two concurrent ends, one wins.
    const ended = await this.store.end(sessionId, status, this.now());
    // Ended by someone else between the read and the write (its lease, say).
    if (!ended) throw this.ended(await this.get(sessionId));
    this.secrets.delete(sessionId);
    this.events.emit("session", ended);
    return ended;
  }

  /** Ends every running session under a lease that ended; returns them. */
  endForLease(leaseId: string): Promise<SessionRow[]> {
    return this.underLease(leaseId, async () => {
      const ended: SessionRow[] = [];
      for (const row of await this.store.running(leaseId)) {
        const e = await this.store.end(row.sessionId, "lease_ended", this.now());
        if (!e) continue;
        this.secrets.delete(row.sessionId);
        ended.push(e);
        this.events.emit("session", e);
      }
      return ended;
    });
  }

  /**
   * At start-up: ends running sessions whose lease is no longer active
   * (it ended while the coordinator was down, or before its event was handled).
   */
  async settle(activeLeaseIds: ReadonlySet<string>): Promise<SessionRow[]> {
    const leases = new Set((await this.store.running()).map((r) => r.leaseId).filter((id) => !activeLeaseIds.has(id)));
    const ended: SessionRow[] = [];
    for (const id of leases) ended.push(...(await this.endForLease(id)));
    return ended;
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

  async get(sessionId: string): Promise<SessionRow> {
    if (sessionId === "") throw invalidArgument("session_id", "a session id is required");
    // No stored id is that long or holds a NUL (which PostgreSQL would refuse to compare).
    const row = sessionId.length <= 128 && !sessionId.includes("\0") ? await this.store.get(sessionId) : undefined;
    if (!row) throw farmError(Errors.SESSION_NOT_FOUND, `no session ${sessionId}`, "session_id");
    return row;
  }

  /** A stored session, or undefined (no checks, no error: for re-reading an id this coordinator was told of). */
  find(sessionId: string): Promise<SessionRow | undefined> {
    return this.store.get(sessionId);
  }

  /** One page, newest first by (create time, session id): unique, and fixed once written. */
  async listPage(filter: SessionFilter, page: PageRequest): Promise<Page<SessionRow>> {
    const f = { physicalId: filter.physicalId || undefined, status: filter.status, owner: filter.owner || undefined };
    const scope = { list: "sessions", filter: f };
    const shape = ["number", "string"] as const;
    // A bad token or size is refused before the store is read; readPage then cuts the page from the rows read.
    const size = pageSizeOf(page.pageSize);
    const after = decodePageToken(page.pageToken, scope, shape);
    // A filter holding a NUL matches nothing stored (and PostgreSQL would refuse it).
    const rows = [f.physicalId, f.owner].some((v) => v?.includes("\0")) ? [] : await this.store.listAfter(f, after, size + 1);
    return readPage(page, scope, shape, (r: SessionRow) => [r.createdAt, r.sessionId] as const, () => rows);
  }

  /** Whether a start or lease end is still running here for this lease. */
  startingUnder(leaseId: string): boolean {
    return this.byLease.has(leaseId);
  }

  /** Runs `fn` after whatever runs for the lease (start, endForLease) has finished. */
  private underLease<T>(leaseId: string, fn: () => Promise<T>): Promise<T> {
    const before = this.byLease.get(leaseId) ?? Promise.resolve();
    const run = before.then(fn, fn);
    const tail = run.catch(() => undefined);
    this.byLease.set(leaseId, tail);
    void tail.then(() => {
      if (this.byLease.get(leaseId) === tail) this.byLease.delete(leaseId);
    });
    return run;
  }

  private ended(row: SessionRow): Error {
    const when = row.endedAt === null ? "" : ` at ${new Date(row.endedAt).toISOString()}`;
    const why: Record<SessionState, string> = { running: "is running", passed: "ended as passed", failed: "ended as failed", lease_ended: "ended when its lease ended" };
    return farmError(Errors.SESSION_ENDED, `session ${row.sessionId} already ${why[row.status]}${when}`, "session_id");
  }
}

/**
 * Masks these secret values (in every form the redactor knows); undefined
 * without any. Values too short to be secrets are left out rather than
 * refused: start() refuses them, this only keeps what may be shown of a
 * refused start (its activity entry) free of the rest.
 */
export function secretMask(values: readonly string[]): Redactor | undefined {
  const usable = values.filter((v) => [...v].length >= MIN_SECRET_LENGTH && v.trim() !== "");
  return usable.length > 0 ? createRedactor({ secrets: usable }) : undefined;
}

/** Whether a JSON value holds a NUL character in any string or key. */
function hasNul(v: JsonValue): boolean {
  if (typeof v === "string") return v.includes("\0");
  if (Array.isArray(v)) return v.some(hasNul);
  if (v !== null && typeof v === "object") return Object.entries(v).some(([k, x]) => k.includes("\0") || hasNul(x));
  return false;
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
