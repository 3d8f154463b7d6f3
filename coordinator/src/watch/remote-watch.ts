import type { Change, ChangeBus, WatchedKind } from "../replicas/change-bus.js";
import type { WatchHub } from "./watch-hub.js";
import { watchMessages, whileWatched, type WatchKind, type WatchSources, type WatchWiring } from "./watch-wiring.js";

/** A step's notice id: its session's id and its sequence, both short. */
export function stepNoticeId(sessionId: string, sequence: number): string {
  return `${sessionId}/${sequence}`;
}

/** The session and sequence a step's notice id names, or undefined for one that names none. */
export function parseStepNoticeId(id: string): { sessionId: string; sequence: number } | undefined {
  const at = id.lastIndexOf("/");
  const sequence = Number(id.slice(at + 1));
  if (at <= 0 || !Number.isSafeInteger(sequence) || sequence < 1) return undefined;
  return { sessionId: id.slice(0, at), sequence };
}

/**
 * Watch streams across replicas, for what is watched but not otherwise
 * shared (activity, evidence, video sessions, sessions, steps). Ours: a
 * notice of each change once stored, whether or not anyone watches here.
 * Theirs: while someone watches here, the row re-read by id and sent as a
 * change made here would be. Only the hub is told: what a local change
 * also sets off (settling a video from its bundle, metrics, forgetting an
 * ended session) was done by the replica that made it.
 */
export function shareWatchChanges(hub: WatchHub, src: WatchSources, wiring: WatchWiring, bus: ChangeBus): void {
  const { log } = src;
  const tell = (kind: WatchedKind, id: string) => {
    bus.publish(kind, id).catch((err: unknown) => log.warn("could not tell the other replicas' watchers of a change; they see it when they re-read", { kind, id, error: (err as Error).message }));
  };
  src.activity.onRecord((row) => tell("activity", String(row.id)));
  src.sessions.events.on("session", (row) => tell("session", row.sessionId));
  src.steps.events.on("step", (step) => tell("step", stepNoticeId(step.sessionId, step.sequence)));
  wiring.stored.on("evidence", (row) => tell("evidence", row.evidenceId)).on("video", (row) => tell("video", row.sessionId));

  const messages = watchMessages(src);
  /** What to re-read for a notice, and the resource whose changes go out in order (a session with its steps). */
  const reread = (c: Change): { resource: string; read: () => Promise<WatchKind | undefined> } | undefined => {
    switch (c.kind) {
      case "activity": {
        const id = Number(c.id);
        if (!Number.isSafeInteger(id) || id < 1) return undefined;
        return { resource: `activity:${id}`, read: async () => mapped(await src.activity.get(id), messages.activity) };
      }
      case "evidence":
        return { resource: `evidence:${c.id}`, read: async () => mapped(await src.evidence.get(c.id), messages.evidence) };
      case "video":
        return { resource: `video:${c.id}`, read: async () => mapped(await src.videos.get(c.id), messages.video) };
      case "session":
        return { resource: `session:${c.id}`, read: async () => mapped(await src.sessions.find(c.id), messages.session) };
      case "step": {
        const step = parseStepNoticeId(c.id);
        if (!step) return undefined;
        return { resource: `session:${step.sessionId}`, read: async () => mapped(await src.steps.get(step.sessionId, step.sequence), messages.step) };
      }
      default:
        return undefined;
    }
  };
  const chains = new ResourceChains();
  // Nobody watching here: nothing to re-read (the notices still go out above).
  whileWatched(hub, () => {
    const onChange = (c: Change) => {
      const r = reread(c);
      if (!r) return;
      chains.run(r.resource, async () => {
        const kind = await r.read();
        if (kind) hub.publish(kind);
      }).catch((err: unknown) => log.warn("could not re-read a change another replica made; watchers here miss it until they re-read", { kind: c.kind, id: c.id, from: c.from, error: (err as Error).message }));
    };
    bus.events.on("change", onChange);
    return () => void bus.events.off("change", onChange);
  });
}

/** The message of a row re-read, or undefined when it is gone. */
async function mapped<T>(row: T | undefined, message: (row: T) => WatchKind | Promise<WatchKind>): Promise<WatchKind | undefined> {
  return row === undefined ? undefined : message(row);
}

/**
 * Work run one after another per resource: notices arrive in the order the
 * changes were stored, and a re-read that finishes early must not send an
 * older state (or a later step) ahead of an earlier one.
 */
class ResourceChains {
  private readonly tails = new Map<string, Promise<void>>();

  run(resource: string, fn: () => Promise<void>): Promise<void> {
    const run = (this.tails.get(resource) ?? Promise.resolve()).then(fn);
    const tail = run.catch(() => undefined);
    this.tails.set(resource, tail);
    void tail.then(() => {
      if (this.tails.get(resource) === tail) this.tails.delete(resource);
    });
    return run;
  }
}
