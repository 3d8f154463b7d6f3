import { randomUUID } from "node:crypto";
import { Errors, farmError, NOT_DISPATCHED } from "@farm/shared/errors";
import type { QuotaReservationStore, ReservationKind } from "./quota-reservation-store.js";

/** Managed evidence one user may keep in the coordinator's store, by default. */
export const DEFAULT_EVIDENCE_QUOTA_BYTES = 10 * 1024 ** 3;
/** Captures and recordings one user may have in flight at once, by default. */
export const DEFAULT_CAPTURES_PER_USER = 4;
/** How long session files being kept are held for: far longer than storing them takes. */
const FILE_HOLD_MS = 10 * 60_000;

const mib = (n: number) => `${Math.round((n / 1024 ** 2) * 10) / 10} MiB`;

/** Bytes held for something in flight; release() when it settles. */
export interface Reservation {
  id: string;
  /** What it holds: a capture's bundle must fit in this. */
  bytes: number;
  release(): Promise<void>;
}

/** Session files held while they are kept: keep(bytes) once stored, or release(). */
export interface FileReservation extends Reservation {
  keep(bytes: number): Promise<void>;
}

/**
 * A user's evidence quota (--evidence-quota) and their captures in flight
 * (--captures-per-user). Counted against the quota: stored bundles (stills
 * and recordings), the files of the user's sessions (step screenshots,
 * device logs, videos, visual diffs) and what is reserved for captures not
 * stored yet. A capture reserves its bundle's maximum size, or what is left
 * of the quota when that is less, before anything runs, so parallel
 * captures cannot all pass a check of what is stored; its bundle's upload
 * must fit what it holds. The reservation is released when it settles. Reservations live in the
 * database with an expiry (the capture's own deadline plus its upload), not
 * in memory: every replica sees them, and a crash cannot hold a user's
 * quota past that expiry.
 */
export class EvidenceQuota {
  private readonly now: () => number;

  constructor(
    private readonly store: QuotaReservationStore,
    readonly quotaBytes: number = DEFAULT_EVIDENCE_QUOTA_BYTES,
    readonly capturesPerUser: number = DEFAULT_CAPTURES_PER_USER,
    now?: () => number,
  ) {
    this.now = now ?? Date.now;
  }

  /**
   * Reserves a capture or recording (its bundle's largest size, or what is
   * left of the quota if less, for `holdMs`) before any device or directory
   * is touched: QUOTA_EXCEEDED (field quota) when nothing is left,
   * RESOURCE_EXHAUSTED (field captures_per_user) when
   * the user has the limit of captures in flight. The id is the evidence id
   * to issue, so the bundle's upload can settle it.
   */
  async reserveCapture(user: string, kind: "still" | "video", maxBytes: number, holdMs: number): Promise<Reservation> {
    return this.reserve(user, kind, true, maxBytes, holdMs, "Nothing was captured");
  }

  /**
   * Reserves session files about to be kept (their exact size);
   * QUOTA_EXCEEDED when they do not fit. keep() counts them as stored.
   */
  async reserveFiles(user: string, bytes: number): Promise<FileReservation> {
    const r = await this.reserve(user, "session-file", false, bytes, FILE_HOLD_MS, "The file was not kept");
    return { ...r, keep: (kept) => this.store.keep(r.id, user, kept) };
  }

  /** The bytes an unexpired reservation holds (an evidence id's: what its bundle must fit); undefined when it is gone. */
  held(id: string): Promise<number | undefined> {
    return this.store.held(id, this.now());
  }

  /** Settles a reservation by id (an evidence id): its bundle is stored, or never will be. */
  release(id: string): Promise<void> {
    return this.store.release(id);
  }

  private async reserve(user: string, kind: ReservationKind, capture: boolean, bytes: number, holdMs: number, outcome: string): Promise<Reservation> {
    const now = this.now();
    const id = randomUUID();
    const limits = { quotaBytes: this.quotaBytes, capturesPerUser: this.capturesPerUser };
    const held = await this.store.reserve({ id, user, kind, capture, bytes, expiresAt: now + holdMs }, limits, now);
    if (held !== undefined) {
      // A release that fails changes nothing for the caller: the row stops counting at its expiry.
      return { id, bytes: held, release: () => this.store.release(id).catch(() => undefined) };
    }
    const u = await this.store.usage(user, now);
    if (capture && u.captures >= this.capturesPerUser) {
      throw farmError(
        Errors.RESOURCE_EXHAUSTED,
        `${user} already has ${u.captures} captures or recordings in flight; the limit per user is ${this.capturesPerUser} (coordinator --captures-per-user). ${outcome}; try again when one ends`,
        "captures_per_user",
        NOT_DISPATCHED,
      );
    }
    const used = u.evidenceBytes + u.sessionFileBytes;
    const why = capture ? `nothing is left for this ${kind}` : `these session files need ${bytes} bytes`;
    throw farmError(
      Errors.QUOTA_EXCEEDED,
      `${user} stores ${used} bytes (${mib(u.evidenceBytes)} of evidence, ${mib(u.sessionFileBytes)} of session files) and has ${u.reservedBytes} bytes reserved for captures in flight; ` +
        `${why} of the quota per user of ${this.quotaBytes} bytes (coordinator --evidence-quota). ${outcome}`,
      "quota",
      NOT_DISPATCHED,
    );
  }
}
