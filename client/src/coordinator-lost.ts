/**
 * How a transport failure reads in Node's and connect-node's messages,
 * for errors that carry no farm detail (the coordinator never answered).
 * An error with a farm detail is the coordinator's own word and is never
 * judged by these.
 */

/** The coordinator could not be reached at all. */
export function isConnectionRefused(rawMessage: string): boolean {
  return /ECONNREFUSED|ENOTFOUND|EHOSTUNREACH/i.test(rawMessage);
}

/**
 * The connection to the coordinator went away under a call: its process
 * died, its host went down, the network dropped (an HTTP/2 stream
 * cancelled with its session, a reset socket, a GOAWAY).
 */
export function isConnectionLost(rawMessage: string): boolean {
  return /ECONNRESET|socket hang up|stream closed|GOAWAY|session closed/i.test(rawMessage);
}
