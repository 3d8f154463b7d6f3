import type { DeviceClient } from "@devicefarmer/adbkit";

/**
 * Pushes a local file to a path on the phone (adb sync), ending when adb says
 * the transfer ended; the signal cancels it. Install and file push both stage
 * their file this way before the job that uses it.
 */
export async function pushToDevice(device: DeviceClient, local: string, remote: string, signal: AbortSignal): Promise<void> {
  const transfer = await device.push(local, remote);
  await new Promise<void>((resolve, reject) => {
    transfer.once("end", () => resolve());
    transfer.once("error", reject);
    signal.addEventListener("abort", () => {
      (transfer as { cancel?: () => void }).cancel?.();
      reject(new Error("deadline exceeded"));
    }, { once: true });
  });
}
