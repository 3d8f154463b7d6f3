import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport, type Transport } from "@connectrpc/connect";
import { createLogger } from "@farm/shared/log";
import { Errors, farmError, toErrorReport } from "@farm/shared/errors";
import { AgentEvidenceService, UploadEvidenceResponseSchema, type UploadEvidenceRequest } from "@farm/shared/gen/farm/v1/agent_evidence_service_pb";
import { uploadBundle } from "./evidence-upload.js";
import { resumeStagedUploads } from "./staged-uploads.js";

const ID = "0f8e2a4c-5b6d-4e7f-8a9b-0c1d2e3f4a5b";
const log = createLogger({ level: "error" });
let staging: string;
let bundle: string;
let manifestText: string;

const sha = (text: string) => createHash("sha256").update(text).digest("hex");

beforeEach(async () => {
  staging = await mkdtemp(join(tmpdir(), "farm-upload-"));
  bundle = join(staging, ID);
  await mkdir(bundle);
  await writeFile(join(bundle, "a.txt"), "artifact\n");
  manifestText = JSON.stringify({ evidenceId: ID, kind: "still", device: { serial: "S1", physicalId: "pid-1" }, artifacts: [{ path: "a.txt" }] });
  await writeFile(join(bundle, "manifest.json"), manifestText);
});

afterEach(async () => {
  await rm(staging, { recursive: true, force: true });
});

/** A coordinator whose store already holds the bundle: it answers from what it holds, or refuses. */
function storeAnswering(answer: (start: { manifestSha256: string }) => { manifestSha256: string } | ConnectError): Transport {
  return createRouterTransport(({ service }) =>
    service(AgentEvidenceService, {
      async uploadEvidence(requests: AsyncIterable<UploadEvidenceRequest>) {
        for await (const msg of requests) {
          if (msg.kind.case !== "start") continue;
          const a = answer({ manifestSha256: (msg.kind.value as { manifestSha256?: string }).manifestSha256 ?? "" });
          if (a instanceof ConnectError) throw a;
          return create(UploadEvidenceResponseSchema, { evidenceId: ID, totalBytes: 9n, manifestSha256: a.manifestSha256, alreadyStored: true });
        }
        throw new ConnectError("no start", Code.InvalidArgument);
      },
    })
  );
}

const spec = () => ({ evidenceId: ID, agentId: "agent-1", serial: "S1", physicalId: "pid-1", kind: "still" as const, dir: bundle, files: ["a.txt"] });

describe("\"already exists\" counts as uploaded only for the same manifest", () => {
  it("announces its manifest's sha256 and accepts a stored bundle with that sha256", async () => {
    let announced = "";
    const transport = storeAnswering((s) => {
      announced = s.manifestSha256;
      return { manifestSha256: sha(manifestText) };
    });
    await expect(uploadBundle(transport, spec())).resolves.toMatchObject({ totalBytes: 9 });
    expect(announced).toBe(sha(manifestText));
  });

  it("is an error when the stored manifest is another one", async () => {
    const transport = storeAnswering(() => ({ manifestSha256: sha("someone else's manifest") }));
    const err = await uploadBundle(transport, spec()).then(() => undefined, (e: unknown) => e);
    expect(err).toBeDefined();
    expect(toErrorReport(err)).toMatchObject({ code: "ALREADY_EXISTS", field: "manifest_json" });
  });

  it("keeps the staged copy when the stored manifest's sha256 differs", async () => {
    const transport = storeAnswering(() => ({ manifestSha256: sha("forged") }));
    const r = await resumeStagedUploads({ stagingDir: staging, transport, agentId: "agent-1", log });
    expect(r.uploaded).toBe(0);
    expect(existsSync(join(bundle, "manifest.json"))).toBe(true);
  });

  it("keeps the staged copy when the coordinator answers ALREADY_EXISTS", async () => {
    const transport = storeAnswering(() => farmError(Errors.ALREADY_EXISTS, `evidence ${ID} already exists`, "evidence_id"));
    const r = await resumeStagedUploads({ stagingDir: staging, transport, agentId: "agent-1", log });
    expect(r.uploaded).toBe(0);
    expect(existsSync(join(bundle, "manifest.json"))).toBe(true);
  });

  it("drops the staged copy once the store holds this very bundle", async () => {
    const transport = storeAnswering(() => ({ manifestSha256: sha(manifestText) }));
    const r = await resumeStagedUploads({ stagingDir: staging, transport, agentId: "agent-1", log });
    expect(r.uploaded).toBe(1);
    expect(existsSync(bundle)).toBe(false);
  });
});

describe("an upload the coordinator stops taking", () => {
  /** A coordinator that reads the first message, or all of them, and then neither reads nor answers. */
  function stalling(after: "start" | "all"): { transport: Transport; reads: () => number } {
    let reads = 0;
    const transport = createRouterTransport(({ service }) =>
      service(AgentEvidenceService, {
        async uploadEvidence(requests: AsyncIterable<UploadEvidenceRequest>) {
          for await (const msg of requests) {
            reads++;
            if (after === "start" && msg.kind.case === "start") break;
          }
          return new Promise<never>(() => {});
        },
      })
    );
    return { transport, reads: () => reads };
  }

  it.each(["start", "all"] as const)("is given up after the idle time (the coordinator stops after %s), as retryable", async (after) => {
    const { transport, reads } = stalling(after);
    const t0 = Date.now();
    const err = await uploadBundle(transport, spec(), undefined, 300).then(() => undefined, (e: unknown) => e);
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(reads()).toBeGreaterThan(0);
    expect(toErrorReport(err)).toMatchObject({ code: Errors.EVIDENCE_TRANSFER_FAILED.code });
    expect(ConnectError.from(err).code).toBe(Code.Unavailable);
  });

  it("leaves the bundle staged and goes on with the next one", async () => {
    const second = "1f8e2a4c-5b6d-4e7f-8a9b-0c1d2e3f4a5b";
    await mkdir(join(staging, second));
    await writeFile(join(staging, second, "manifest.json"), JSON.stringify({ evidenceId: second, kind: "still", device: { serial: "S1", physicalId: "pid-1" }, artifacts: [] }));
    const t0 = Date.now();
    const r = await resumeStagedUploads({ stagingDir: staging, transport: stalling("start").transport, agentId: "agent-1", log, uploadIdleMs: 300 });
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(r).toEqual({ uploaded: 0, pending: 2 });
    expect(existsSync(join(bundle, "manifest.json"))).toBe(true);
  });
});
