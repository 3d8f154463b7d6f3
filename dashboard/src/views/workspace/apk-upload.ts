/** What the coordinator's upload endpoint answers with when it refuses. */
interface Refusal {
  code?: string;
  message?: string;
  field?: string;
}

/**
 * The file's sha256 as hex, announced with the upload and checked by the
 * coordinator as it stores it; undefined where the page has no WebCrypto
 * (plain http other than localhost): the coordinator then hashes it itself.
 */
async function sha256Hex(file: Blob): Promise<string | undefined> {
  if (!globalThis.crypto?.subtle) return undefined;
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", await file.arrayBuffer()));
  return [...digest].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Uploads an APK to the coordinator (POST /dashboard/api/blobs, the session
 * cookie authenticating) and resolves to its blob id for InstallApp.
 * `progress` gets the fraction sent, 0..1.
 */
export async function uploadApk(file: File, progress: (fraction: number) => void, signal?: AbortSignal): Promise<string> {
  const sha256 = await sha256Hex(file);
  return new Promise<string>((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/dashboard/api/blobs");
    xhr.setRequestHeader("content-type", "application/octet-stream");
    if (sha256 !== undefined) xhr.setRequestHeader("x-farm-sha256", sha256);
    xhr.setRequestHeader("x-farm-name", encodeURIComponent(file.name));
    xhr.responseType = "json";
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable && e.total > 0) progress(e.loaded / e.total);
    };
    xhr.onload = () => {
      const body = (xhr.response ?? {}) as { blobId?: string } & Refusal;
      if (xhr.status === 200 && typeof body.blobId === "string") return resolve(body.blobId);
      reject(new Error(`${body.code ?? `HTTP ${xhr.status}`}: ${body.message ?? "the upload was refused"}${body.field ? ` (${body.field})` : ""}`));
    };
    xhr.onerror = () => reject(new Error("the upload failed (connection lost)"));
    xhr.onabort = () => reject(new Error("the upload was cancelled"));
    signal?.addEventListener("abort", () => xhr.abort(), { once: true });
    xhr.send(file);
  });
}
