import { promisify } from "node:util";
import { gzip } from "node:zlib";
import type { Compression } from "@connectrpc/connect/protocol";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";

const gzipAsync = promisify(gzip);

/**
 * gzip as Connect's, but answers are deflated at level 1: a 1,000-phone
 * ListDevices page (215 KB) took 1.8-2.5 ms of CPU against 3.6-4.4 ms at
 * zlib's default level and came out 1.5 % larger (50.1 against 49.4 KB);
 * inflating costs the same. Requests inflate with Connect's own code (its
 * size cap and errors).
 */
export const answerGzip: Compression = {
  name: "gzip",
  compress: async (bytes) => new Uint8Array(await gzipAsync(bytes, { level: 1 })),
  decompress: (bytes, readMaxBytes) => compressionGzip.decompress(bytes, readMaxBytes),
};

/** The coordinator's compressions, Connect's handler and the fast paths alike, in Connect's default order. */
export const ANSWER_COMPRESSION: Compression[] = [answerGzip, compressionBrotli];
