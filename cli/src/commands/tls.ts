import { randomBytes } from "node:crypto";
import { isIP } from "node:net";
import { join } from "node:path";
import { mkdir, writeFile } from "node:fs/promises";
import forge from "node-forge";
import { Errors } from "@farm/shared/errors";
import { CliError } from "../cli-error.js";
import type { selfSignedOptions } from "../tree/admin-commands.js";
import type { Action } from "../tree/spec.js";

const CA_YEARS = 10;
const SERVER_DAYS = 825;

function serial(): string {
  // Positive, 16 random bytes: unique without a registry.
  return "01" + randomBytes(15).toString("hex");
}

function name(cn: string): forge.pki.CertificateField[] {
  return [
    { name: "commonName", value: cn },
    { name: "organizationName", value: "farm lab" },
  ];
}

/** Writes a new file only: an existing CA or key is never overwritten. */
async function writeNew(path: string, text: string, mode: number): Promise<void> {
  try {
    await writeFile(path, text, { flag: "wx", mode });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") throw new CliError(Errors.ALREADY_EXISTS, `${path} exists; choose another --out-dir (nothing was overwritten)`, "out-dir");
    throw err;
  }
}

/** `farm tls self-signed`: a lab CA and a coordinator certificate it signs. */
export const selfSigned: Action<typeof selfSignedOptions> = async ({ opts, ctx }) => {
  const hosts = opts.host;
  if (hosts.length === 0) throw new CliError(Errors.INVALID_ARGUMENT, "give at least one --host (the names and addresses clients use for the coordinator)", "host");
  for (const h of hosts) {
    if (!isIP(h) && !/^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/.test(h)) {
      throw new CliError(Errors.INVALID_ARGUMENT, `"${h}" is neither a DNS name nor an IP address`, "host");
    }
  }
  const outDir = opts.outDir;
  if (!outDir) throw new CliError(Errors.INVALID_ARGUMENT, "--out-dir is required", "out-dir");
  await mkdir(outDir, { recursive: true, mode: 0o700 });

  const now = new Date();
  const caKeys = forge.pki.rsa.generateKeyPair(2048);
  const ca = forge.pki.createCertificate();
  ca.publicKey = caKeys.publicKey;
  ca.serialNumber = serial();
  ca.validity.notBefore = new Date(now.getTime() - 60_000);
  ca.validity.notAfter = new Date(now.getTime() + CA_YEARS * 365 * 86_400_000);
  ca.setSubject(name("farm lab CA"));
  ca.setIssuer(name("farm lab CA"));
  ca.setExtensions([
    { name: "basicConstraints", cA: true, critical: true, pathLenConstraint: 0 },
    { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
    { name: "subjectKeyIdentifier" },
  ]);
  ca.sign(caKeys.privateKey, forge.md.sha256.create());

  const keys = forge.pki.rsa.generateKeyPair(2048);
  const cert = forge.pki.createCertificate();
  cert.publicKey = keys.publicKey;
  cert.serialNumber = serial();
  cert.validity.notBefore = new Date(now.getTime() - 60_000);
  cert.validity.notAfter = new Date(now.getTime() + SERVER_DAYS * 86_400_000);
  cert.setSubject(name(hosts[0]!));
  cert.setIssuer(ca.subject.attributes);
  cert.setExtensions([
    { name: "basicConstraints", cA: false },
    { name: "keyUsage", digitalSignature: true, keyEncipherment: true, critical: true },
    { name: "extKeyUsage", serverAuth: true },
    { name: "subjectAltName", altNames: hosts.map((h) => (isIP(h) ? { type: 7, ip: h } : { type: 2, value: h })) },
    { name: "subjectKeyIdentifier" },
  ]);
  cert.sign(caKeys.privateKey, forge.md.sha256.create());

  const files = { ca: join(outDir, "ca.pem"), caKey: join(outDir, "ca.key"), cert: join(outDir, "server.pem"), key: join(outDir, "server.key") };
  await writeNew(files.caKey, forge.pki.privateKeyToPem(caKeys.privateKey), 0o600);
  await writeNew(files.key, forge.pki.privateKeyToPem(keys.privateKey), 0o600);
  await writeNew(files.ca, forge.pki.certificateToPem(ca), 0o644);
  await writeNew(files.cert, forge.pki.certificateToPem(cert), 0o644);
  const fingerprint = forge.md.sha256.create().update(forge.asn1.toDer(forge.pki.certificateToAsn1(ca)).getBytes()).digest().toHex();
  ctx.printer.result({ ...files, hosts, caSha256: fingerprint, serverNotAfter: cert.validity.notAfter.toISOString() }, () =>
    [
      `CA:          ${files.ca} (key ${files.caKey}; keep it offline)`,
      `certificate: ${files.cert} for ${hosts.join(", ")}, valid until ${cert.validity.notAfter.toISOString().slice(0, 10)}`,
      `key:         ${files.key}`,
      `CA sha256:   ${fingerprint}`,
      "coordinator: --tls-cert server.pem --tls-key server.key; clients and agents: --ca-file ca.pem",
    ].join("\n"));
  return 0;
};
