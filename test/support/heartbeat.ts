/**
 * The heartbeat interval of the labs' agents, in ms. Three missed ones end an
 * agent's session, so this is what a frozen event loop may take before the
 * coordinator says "the agent went away": 500 ms (1.5 s) was outlasted by an
 * agent encoding a capture while both cores were busy. A killed agent closes
 * its connection and is offline at once, whatever this is; only tests of a
 * frozen agent wait for the misses, and they set their own.
 */
export const HEARTBEAT_INTERVAL = "2000";
