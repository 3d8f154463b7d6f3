/**
 * Answers at least this long are gzipped for callers that accept it (the
 * coordinator's Connect handler and its unary fast path; farm's clients
 * accept gzip). Below it, gzip and gunzip cost more than the bytes saved
 * take on a LAN: a 10 KiB ownership read took 1.7 ms gzipped against 1.1
 * plain on loopback (test/bench/rpc-floor.ts), while a 1,000-phone
 * ListDevices page (169 KB plain, 12 KB gzipped) still shrinks for slow
 * links. Connect's default is 1 KiB.
 */
export const COMPRESS_MIN_BYTES = 32 * 1024;
