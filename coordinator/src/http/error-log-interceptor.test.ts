import { describe, expect, it } from "vitest";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { Errors, farmError, toErrorReport } from "@farm/shared/errors";
import type { LogFields, Logger } from "@farm/shared/log";
import { errorLogInterceptor } from "./error-log-interceptor.js";

function recorder(): { log: Logger; lines: { level: string; msg: string; fields?: LogFields }[] } {
  const lines: { level: string; msg: string; fields?: LogFields }[] = [];
  const at = (level: string) => (msg: string, fields?: LogFields) => void lines.push({ level, msg, ...(fields ? { fields } : {}) });
  const log: Logger = { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error"), child: () => log };
  return { log, lines };
}

type Next = Parameters<Interceptor>[0];
const req = { service: { typeName: "farm.v1.BlobService" }, method: { name: "UploadBlob" } } as unknown as Parameters<Next>[0];

async function failWith(err: unknown, log: Logger): Promise<ConnectError> {
  const next = (async () => {
    throw err;
  }) as unknown as Next;
  return errorLogInterceptor(log, ["/srv/farm/coordinator"])(next)(req).then(
    () => {
      throw new Error("expected a failure");
    },
    (e: unknown) => ConnectError.from(e),
  );
}

describe("errorLogInterceptor", () => {
  it("logs a storage failure at error level with its code, and keeps host paths out of what the client gets", async () => {
    const { log, lines } = recorder();
    const err = await failWith(
      farmError(
        Errors.EVIDENCE_TRANSFER_FAILED,
        "the coordinator could not store the blob: ENOSPC: no space left on device, open '/srv/farm/coordinator/blobs/1.part'",
        undefined,
        undefined,
        Object.assign(new Error("ENOSPC: no space left on device"), { code: "ENOSPC" }),
      ),
      log,
    );
    expect(lines).toEqual([expect.objectContaining({ level: "error", fields: expect.objectContaining({ method: "farm.v1.BlobService/UploadBlob", code: "EVIDENCE_TRANSFER_FAILED" }) })]);
    expect(String(lines[0]?.fields?.["error"])).toContain("/srv/farm/coordinator/blobs/1.part");
    expect(err.rawMessage).not.toContain("/srv/farm");
    expect(err.rawMessage).toContain("'1.part'");
    expect(toErrorReport(err).code).toBe("EVIDENCE_TRANSFER_FAILED");
  });

  it("logs internal errors, not the caller's mistakes", async () => {
    const { log, lines } = recorder();
    await failWith(new Error("boom"), log);
    await failWith(farmError(Errors.INVALID_ARGUMENT, "bad", "size"), log);
    expect(lines.map((l) => l.level)).toEqual(["error"]);
  });

  it("names a message over the method's cap MESSAGE_TOO_LARGE", async () => {
    const { log } = recorder();
    const err = await failWith(new ConnectError("message size 3000000 is larger than configured readMaxBytes 2097152", Code.ResourceExhausted), log);
    expect(toErrorReport(err).code).toBe("MESSAGE_TOO_LARGE");
  });
});
