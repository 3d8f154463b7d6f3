import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { ErrorCodes, farmError } from "@farm/shared/errors";
import type { EvidenceManifest } from "@farm/shared/evidence-manifest";
import { writePrivateFile } from "@farm/shared/secure-file";
import { VerifiedFileWriter } from "@farm/shared/verified-file";
import type { PullEvidenceResponse } from "@farm/shared/gen/farm/v1/evidence_service_pb";

const pathPattern = /^[A-Za-z0-9._-]+$/;

/**
 * Claims a new bundle directory: mkdir without `recursive` is atomic, so of
 * two captures racing for one path exactly one wins; the other gets
 * EVIDENCE_OUTPUT_EXISTS and touches nothing.
 */
export async function claimBundleDir(dir: string): Promise<void> {
  try {
    await mkdir(dir, { mode: 0o700 });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EEXIST") throw farmError(Code.AlreadyExists, ErrorCodes.evidenceOutputExists, `output dir ${dir} already exists; a new capture needs a new directory`, "output-dir");
    throw farmError(Code.FailedPrecondition, ErrorCodes.invalidArgument, `cannot create output dir ${dir}: ${(err as Error).message}`, "output-dir");
  }
}

/**
 * Writes a pulled bundle into a claimed directory: every file checked
 * against its announced size and sha256 as it arrives, then the manifest
 * checked against the files, and written last and atomically. If the stream
 * breaks, the files received so far stay but no manifest is written, so the
 * directory never claims more than it holds.
 */
export async function writePulledBundle(dir: string, stream: AsyncIterable<PullEvidenceResponse>): Promise<EvidenceManifest> {
  const received = new Map<string, { size: number; sha256: string }>();
  let current: { path: string; file: VerifiedFileWriter } | undefined;
  const endFile = async () => {
    const c = current;
    if (!c) return;
    current = undefined;
    const got = await c.file.finish();
    if (!got.ok) {
      throw farmError(Code.DataLoss, ErrorCodes.evidenceTransferFailed, `${c.path}: got ${got.size} bytes with sha256 ${got.sha256}, expected ${c.file.expected.size} bytes with ${c.file.expected.sha256}`);
    }
    received.set(c.path, c.file.expected);
  };
  try {
    for await (const msg of stream) {
      switch (msg.kind.case) {
        case "file": {
          await endFile();
          const { path, size, sha256 } = msg.kind.value;
          if (!pathPattern.test(path) || path === "manifest.json" || received.has(path)) {
            throw farmError(Code.DataLoss, ErrorCodes.evidenceTransferFailed, `refusing file name "${path}" from the coordinator`);
          }
          current = { path, file: await VerifiedFileWriter.create(join(dir, path), { size: Number(size), sha256 }) };
          break;
        }
        case "chunk": {
          const c = current;
          if (!c) throw farmError(Code.DataLoss, ErrorCodes.evidenceTransferFailed, "data arrived before a file header");
          if (!(await c.file.write(msg.kind.value))) throw farmError(Code.DataLoss, ErrorCodes.evidenceTransferFailed, `${c.path} is larger than announced`);
          break;
        }
        case "manifestJson": {
          await endFile();
          // The coordinator checked the schema when the bundle was stored;
          // here every listed file must have arrived intact, and nothing else.
          const manifest = JSON.parse(msg.kind.value) as EvidenceManifest;
          if (manifest.schemaVersion !== 1 || !Array.isArray(manifest.artifacts)) {
            throw farmError(Code.DataLoss, ErrorCodes.evidenceTransferFailed, "the manifest is not schema version 1");
          }
          for (const a of manifest.artifacts) {
            if (a.path === null) continue;
            const f = received.get(a.path);
            if (!f || f.size !== a.bytes || f.sha256 !== a.sha256) throw farmError(Code.DataLoss, ErrorCodes.evidenceTransferFailed, `artifact ${a.path} was not received intact`);
          }
          await writePrivateFile(join(dir, "manifest.json"), msg.kind.value);
          return manifest;
        }
        default:
          break;
      }
    }
  } finally {
    await current?.file.abort();
  }
  throw farmError(Code.DataLoss, ErrorCodes.evidenceTransferFailed, "the transfer ended before the manifest; the directory holds only the files received so far");
}
