import { clientOptions } from "../options/common-options.js";
import { durationIn, flag, list, parsed, parsedWithDefault, text } from "../options/index.js";
import { parseApiLevel } from "../options/api-level.js";
import { group, leaf } from "./spec.js";
import { sessionPolicyOptions } from "./session-commands.js";

/** The coordinator's longest lease and longest wait for one. */
const DAY_MS = 24 * 3_600_000;

/** Which device a lease may take, and how long to wait and hold it. */
export const selectorOptions = {
  device: text("--device <serial>", "This serial (a physical id, or its unique prefix, is taken too)"),
  physicalId: text("--physical-id <id>", "This physical device: the whole id or a unique prefix (as farm devices shows it)"),
  label: list("--label <key=value>", "Devices with this label"),
  model: text("--model <model>", "Devices of this model"),
  apiLevel: parsed("--api-level <min[..max]>", "Android API level, or a range", parseApiLevel),
  agent: text("--agent <name>", "Devices on this agent"),
  wait: { ...parsedWithDefault("--wait <duration>", "How long to wait in the queue when none is free (30s, 10m)", durationIn(0, DAY_MS), 0), defaultText: "0 (do not wait)" },
  ttl: { ...parsedWithDefault("--ttl <duration>", "How long the lease lasts unless renewed", durationIn(1_000, DAY_MS), 300_000), defaultText: "5m" },
};

// --timeout is accepted for symmetry; a wait's deadline is --wait.
export const acquireOptions = { ...clientOptions, ...selectorOptions };
export const leaseAcquire = leaf({
  name: "acquire",
  summary: "Lease a device; prints the lease id, token, device and expiry",
  options: acquireOptions,
  examples: ["farm lease acquire --label rack=b2 --api-level 33..34 --wait 10m --ttl 5m"],
  load: async () => (await import("../commands/lease.js")).acquireLease,
});

export const tokenOption = { lease: text("--lease <token>", "Lease token", { env: "FARM_LEASE" }) };
export const renewOptions = { ...clientOptions, ...tokenOption, ttl: { ...parsed("--ttl <duration>", "New time to live", durationIn(1_000, DAY_MS)), defaultText: "the lease's own" } };
export const releaseOptions = { ...clientOptions, ...tokenOption };
export const leaseListOptions = clientOptions;
export const runOptions = {
  ...clientOptions,
  ...selectorOptions,
  session: flag("--session", "Also record a session: FARM_SESSION for the command, ended passed on exit 0, else failed"),
  sessionName: text("--session-name <text>", "The session's name (with --session)"),
  export: text("--export <dir>", "With --session: after the command, export the session's timeline and screenshots to this new directory (relative: to the working directory); its path is in the summary"),
  summary: text("--summary <file>", "After the command exits, write a JSON summary there (lease, phone, session, steps, failed steps, exit code); -o json also prints it on stdout"),
  ...sessionPolicyOptions,
};

export const leaseGroup = group({
  name: "lease",
  summary: "Leases: acquire, renew, release, list, run",
  commands: [
    leaseAcquire,
    leaf({ name: "renew", summary: "Extend a lease before it expires", options: renewOptions, load: async () => (await import("../commands/lease.js")).renewLease }),
    leaf({ name: "release", summary: "Give a leased device back", options: releaseOptions, load: async () => (await import("../commands/lease.js")).releaseLease }),
    leaf({ name: "list", summary: "Active leases and the wait queue (wide: also lease ids and tickets)", options: leaseListOptions, load: async () => (await import("../commands/lease.js")).listLeases }),
    leaf({
      name: "run",
      summary: "Lease a device, run a command with FARM_LEASE and FARM_DEVICE (and FARM_SESSION with --session), release on exit",
      args: [{ name: "command", description: "The command and its words (after --)", required: true, variadic: true }],
      options: runOptions,
      passThrough: true,
      examples: [
        "farm lease run --label pool=ci --wait 15m --ttl 2m -- ./run-e2e.sh",
        "farm lease run --device emulator-5554 --session --session-name nightly -- ./run-e2e.sh",
        "farm lease run --label pool=ci --session --summary run.json -- ./run-e2e.sh",
      ],
      load: async () => (await import("../commands/lease.js")).runLeased,
    }),
  ],
});
