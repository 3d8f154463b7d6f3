import { createHash } from "node:crypto";
import { createClient, type Client, type Transport } from "@connectrpc/connect";
import type { Http2SessionManager } from "@connectrpc/connect-node";
import { farmTransport } from "@farm/shared/farm-transport";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { SessionService } from "@farm/shared/gen/farm/v1/session_service_pb";
import { BlobService } from "@farm/shared/gen/farm/v1/blob_service_pb";
import { Errors, farmError } from "@farm/shared/errors";

/** Screenshots held in memory for one command (a 4K phone's PNG is a few MiB). */
export const MAX_SCREENSHOT_BYTES = 64 * 1024 * 1024;

/**
 * farm's own services as one WebDriver session's caller sees them: a
 * client over the coordinator's own address with the caller's token, so
 * authentication, method rules, lease checks, the journal, the activity log
 * and session steps apply exactly as for the CLI. The lease token rides on
 * every call once granted (x-farm-lease); a recorded step adds
 * x-farm-session per call.
 */
export class FarmCalls {
  readonly device: Client<typeof DeviceService>;
  readonly leases: Client<typeof LeaseService>;
  readonly sessions: Client<typeof SessionService>;
  readonly blobs: Client<typeof BlobService>;
  private leaseToken = "";
  private connection: Http2SessionManager | undefined;

  constructor(url: string, token: string, caFile?: string) {
    const transport: Transport = farmTransport({
      url,
      token,
      ...(caFile ? { caFile } : {}),
      track: (manager) => (this.connection = manager),
      interceptors: [
        (next) => (req) => {
          if (this.leaseToken !== "") req.header.set("x-farm-lease", this.leaseToken);
          return next(req);
        },
      ],
    });
    this.device = createClient(DeviceService, transport);
    this.leases = createClient(LeaseService, transport);
    this.sessions = createClient(SessionService, transport);
    this.blobs = createClient(BlobService, transport);
  }

  /** Closes this session's connection to the coordinator. */
  close(): void {
    this.connection?.abort();
  }

  useLease(token: string): void {
    this.leaseToken = token;
  }

  /** A blob (a screenshot) in memory, checked against its header's size and sha256. */
  async download(blobId: string, timeoutMs: number): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let expected: { size: number; sha256: string } | undefined;
    let got = 0;
    for await (const res of this.blobs.downloadBlob({ blobId }, { timeoutMs })) {
      const part = res.part?.kind;
      if (part?.case === "header") {
        expected = { size: Number(part.value.size), sha256: part.value.sha256 };
        if (expected.size > MAX_SCREENSHOT_BYTES) throw farmError(Errors.SCREENSHOT_TOO_LARGE, `the screenshot is ${expected.size} bytes; the WebDriver endpoint holds at most ${MAX_SCREENSHOT_BYTES}`);
      } else if (part?.case === "chunk") {
        if (!expected) throw farmError(Errors.SCREENSHOT_TRANSFER_FAILED, "blob data arrived before its header");
        got += part.value.length;
        if (got > expected.size) throw farmError(Errors.SCREENSHOT_TRANSFER_FAILED, "the screenshot is larger than announced");
        chunks.push(Buffer.from(part.value));
      }
    }
    const bytes = Buffer.concat(chunks);
    if (!expected || bytes.length !== expected.size || createHash("sha256").update(bytes).digest("hex") !== expected.sha256) {
      throw farmError(Errors.SCREENSHOT_TRANSFER_FAILED, "the screenshot arrived damaged (size or sha256 differ from its header)");
    }
    return bytes;
  }

  /** Bytes the client sent (an APK) into the blob store, for InstallApp. */
  async upload(bytes: Buffer, name: string, timeoutMs: number): Promise<string> {
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    const res = await this.blobs.uploadBlob(
      (async function* () {
        yield { part: { kind: { case: "header" as const, value: { size: BigInt(bytes.length), sha256, name } } } };
        for (let at = 0; at < bytes.length; at += 1024 * 1024) yield { part: { kind: { case: "chunk" as const, value: bytes.subarray(at, at + 1024 * 1024) } } };
      })(),
      { timeoutMs },
    );
    return res.blobId;
  }
}
