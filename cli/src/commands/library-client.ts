import { FarmClient } from "@farm/client/farm-client";
import { failureAsSent } from "@farm/client/to-farm-error";
import type { ClientSession } from "../session.js";
import { libraryWire } from "./device-target.js";

/**
 * @farm/client's FarmClient for a command that is not about one device's
 * actions (sessions, recordings, ownership): the library's calls on one
 * connection the run closes at its end, refused without a token as every
 * command is (libraryWire).
 */
export function libraryClient(session: ClientSession): FarmClient {
  let farm = clients.get(session);
  if (!farm) {
    farm = new FarmClient(libraryWire(session));
    clients.set(session, farm);
  }
  return farm;
}

/** One FarmClient per resolved session (its config, its signal): calls of one command share its connection. */
const clients = new WeakMap<ClientSession, FarmClient>();

/** A library stream's messages, its failure as the transport raised it (as asCli does for a call). */
export async function* asCliStream<T>(stream: AsyncIterable<T>): AsyncGenerator<T> {
  try {
    for await (const m of stream) yield m;
  } catch (err) {
    throw failureAsSent(err);
  }
}
