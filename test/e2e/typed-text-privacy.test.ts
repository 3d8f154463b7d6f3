/**
 * Typed text is a secret, against separate coordinator and agent processes:
 * an operator types a password on the phone she leased (SendInput); another
 * operator and a viewer read the ownership status (the agent's journal), an
 * action receipt, the activity log and a Watch stream, and see only the
 * kind, the length and a keyed hash (HMAC-SHA256 under the coordinator's
 * summary key, kept 0600 in its data dir); she and an admin see the text.
 * An admin rotates the key and the summaries change.
 */
import { createHash, createHmac } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient } from "@connectrpc/connect";
import { farmTransport } from "@farm/shared/farm-transport";
import { WatchService, type WatchResponse } from "@farm/shared/gen/farm/v1/watch_service_pb";
import { adbConnect, SimDevice } from "../devsim/index.js";
import { farm, waitFor } from "../support/farm-process.js";
import { startSplitFarm, type SplitFarm } from "../support/split-farm.js";

const SECRET = "MyP4ssw0rd";
// KEYCODE_7, by number.
const PIN_KEY = "14";

let lab: SplitFarm;
let phone: SimDevice;
let serial: string;
const users: Record<string, { token: string; env: NodeJS.ProcessEnv }> = {};

async function user(name: string, role: string): Promise<{ token: string; env: NodeJS.ProcessEnv }> {
  const r = await farm(["token", "create", "--kind", "user", "--name", name, "--role", role], lab.env);
  if (r.code !== 0) throw new Error(r.stdout + r.stderr);
  const token = String(r.json["token"]);
  return { token, env: { ...lab.env, FARM_TOKEN: token } };
}

const keyFile = () => join(lab.dir.path, "coordinator", "summary.key");
const hmac = (key: Buffer, text: string) => createHmac("sha256", key).update(text).digest("hex");
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

/** A Watch stream of one token, with the activity entries it was sent. */
function watch(token: string) {
  const stop = new AbortController();
  const got: WatchResponse[] = [];
  let ready: () => void = () => {};
  const isReady = new Promise<void>((resolve) => (ready = resolve));
  const done = (async () => {
    for await (const m of createClient(WatchService, farmTransport({ url: lab.url, token })).watch({}, { signal: stop.signal })) {
      if (m.kind.case === "ready") ready();
      got.push(m);
    }
  })().catch(() => undefined);
  return {
    ready: isReady,
    activity: () => got.flatMap((m) => (m.kind.case === "activity" && m.kind.value.command === "sendInput" ? [m.kind.value.detail] : [])),
    async stop() {
      stop.abort();
      await done;
    },
  };
}

beforeAll(async () => {
  lab = await startSplitFarm("typed-text-privacy");
  phone = new SimDevice({ serialno: "TYPED01" });
  serial = await adbConnect(lab.adb.port, "127.0.0.1", await phone.listen());
  users["alice"] = await user("alice", "operator");
  users["bob"] = await user("bob", "operator");
  users["vera"] = await user("vera", "viewer");
  await waitFor("the phone online", async () => {
    const r = await farm(["devices"], lab.env);
    return ((r.json["devices"] ?? []) as { serial: string; state: string }[]).some((d) => d.serial === serial && d.state === "device") ? true : undefined;
  });
});

afterAll(async () => {
  await phone?.close();
  await lab?.stop();
});

describe("typed text", () => {
  it("is shown only to its typist and admins in ownership status, receipts, activity and watch; others see kind, length and a keyed hash", async () => {
    const alice = users["alice"] as { token: string; env: NodeJS.ProcessEnv };
    const bob = users["bob"] as { token: string; env: NodeJS.ProcessEnv };
    const vera = users["vera"] as { token: string; env: NodeJS.ProcessEnv };
    const watchers = { alice: watch(alice.token), vera: watch(vera.token), admin: watch(String(lab.env["FARM_TOKEN"])) };
    await Promise.all(Object.values(watchers).map((w) => w.ready));

    const lease = await farm(["lease", "acquire", "--device", serial, "--ttl", "5m", "--wait", "20s"], alice.env);
    expect(lease.code).toBe(0);
    const leaseToken = String((lease.json["lease"] as { token: string }).token);
    const typing = { ...alice.env, FARM_LEASE: leaseToken };
    const typed = await farm(["input", "--device", serial, "text", SECRET], typing);
    expect(typed.json).toMatchObject({ ok: true });
    const actionId = String(typed.json["actionId"]);
    // A PIN typed key by key: each key is typed text too.
    expect((await farm(["input", "--device", serial, "key", PIN_KEY], typing)).json).toMatchObject({ ok: true });
    expect((await farm(["input", "--device", serial, "key", "KEYCODE_HOME"], typing)).json).toMatchObject({ ok: true });

    // The agent's journal, through ownership status: the others never read the text.
    const status = async (env: NodeJS.ProcessEnv) => {
      const r = await farm(["device", "ownership", "status", "--device", serial], env);
      expect(r.code).toBe(0);
      return JSON.stringify(r.json);
    };
    for (const env of [bob.env, vera.env]) expect(await status(env)).not.toContain(SECRET);

    const key = await readFile(keyFile());
    expect(key.length).toBe(32);
    expect((await stat(keyFile())).mode & 0o777).toBe(0o600);
    const textHmac = hmac(key, SECRET);
    const keyHmac = hmac(key, PIN_KEY);
    // What a plain hash would have given away: a guess checked against it.
    const plain = [sha256(SECRET), sha256(JSON.stringify({ kind: "text", text: SECRET })), sha256(PIN_KEY)];

    // What they see instead: kind, length and keyed hash; the typist and an admin see it all.
    const inputRequests = (seen: string) => (JSON.parse(seen) as { ownership: { recent: { kind: string; requestJson: string; requestSha256: string }[] } }).ownership.recent.filter((r) => r.kind === "input");
    for (const env of [alice.env, lab.env]) {
      const seen = await status(env);
      expect(seen).toContain(SECRET);
      expect(inputRequests(seen).map((r) => JSON.parse(r.requestJson) as unknown)).toContainEqual({ kind: "key", key: PIN_KEY });
    }
    for (const env of [bob.env, vera.env]) {
      const seen = await status(env);
      expect(seen).not.toContain(SECRET);
      for (const p of plain) expect(seen).not.toContain(p);
      const recent = inputRequests(seen);
      const requests = recent.map((r) => JSON.parse(r.requestJson) as Record<string, unknown>);
      expect(requests).toContainEqual({ kind: "text", length: SECRET.length, textHmac, redacted: true });
      expect(requests).toContainEqual({ kind: "key", length: PIN_KEY.length, keyHmac, redacted: true });
      expect(requests).toContainEqual({ kind: "key", key: "KEYCODE_HOME" });
      expect(requests.filter((r) => r["key"] === PIN_KEY)).toEqual([]);
      // Only the record with nothing secret keeps its request's plain sha256.
      expect(recent.filter((r) => r.requestSha256 !== "").map((r) => JSON.parse(r.requestJson) as unknown)).toEqual([{ kind: "key", key: "KEYCODE_HOME" }]);
    }
    const receipt = async (env: NodeJS.ProcessEnv) => JSON.stringify((await farm(["device", "ownership", "receipt", "--device", serial, "--action-id", actionId], env)).json);
    expect(await receipt(alice.env)).toContain(SECRET);
    // While alice holds the phone its receipts are hers (lease_holder_only); once it is free, redacted for others.
    expect(JSON.parse(await receipt(bob.env))).toMatchObject({ ok: false, code: "LEASE_HELD_BY_OTHER", field: "lease" });

    // The activity log.
    const activity = async (env: NodeJS.ProcessEnv) => {
      const r = await farm(["activity", "--device", serial], env);
      expect(r.code).toBe(0);
      return (r.json["entries"] as { command: string; caller: string; detail: string }[]).filter((e) => e.command === "sendInput" && e.caller === "alice").map((e) => e.detail).reverse();
    };
    const clear = [`text ${SECRET}`, `key ${PIN_KEY}`, "key KEYCODE_HOME"];
    const redacted = [`text [${SECRET.length} chars, hmac:${textHmac}]`, `key [${PIN_KEY.length} chars, hmac:${keyHmac}]`, "key KEYCODE_HOME"];
    expect(await activity(alice.env)).toEqual(clear);
    expect(await activity(lab.env)).toEqual(clear);
    expect(await activity(bob.env)).toEqual(redacted);
    expect(await activity(vera.env)).toEqual(redacted);

    // The Watch stream: each entry was stored before its caller was answered, and sent to watchers as stored.
    await waitFor("the watchers' activity", async () => (Object.values(watchers).every((w) => w.activity().length === 3) ? true : undefined));
    expect(watchers.alice.activity()).toEqual(clear);
    expect(watchers.admin.activity()).toEqual(clear);
    expect(watchers.vera.activity()).toEqual(redacted);
    for (const w of Object.values(watchers)) await w.stop();
    expect((await farm(["lease", "release", "--lease", leaseToken], alice.env)).json).toMatchObject({ ok: true });
    const bobsReceipt = await receipt(bob.env);
    expect(bobsReceipt).toContain(textHmac);
    expect(bobsReceipt).not.toContain(SECRET);
  });

  it("is summarised with a new key after an admin rotates it; others may not rotate", async () => {
    const vera = users["vera"] as { token: string; env: NodeJS.ProcessEnv };
    const bob = users["bob"] as { token: string; env: NodeJS.ProcessEnv };
    const before = await readFile(keyFile());
    const detail = async () => ((await farm(["activity", "--device", serial], vera.env)).json["entries"] as { command: string; detail: string }[]).find((e) => e.command === "sendInput" && e.detail.startsWith("text "))?.detail;
    expect(await detail()).toBe(`text [${SECRET.length} chars, hmac:${hmac(before, SECRET)}]`);

    const refused = await farm(["privacy", "rotate-key"], bob.env);
    expect(refused.json).toMatchObject({ ok: false, code: "PERMISSION_DENIED" });
    const rotated = await farm(["privacy", "rotate-key"], lab.env);
    expect(rotated.json).toMatchObject({ ok: true });

    const after = await readFile(keyFile());
    expect(after.equals(before)).toBe(false);
    expect((await stat(keyFile())).mode & 0o777).toBe(0o600);
    expect(await detail()).toBe(`text [${SECRET.length} chars, hmac:${hmac(after, SECRET)}]`);
    // Never in the coordinator's log.
    const logged = lab.coordinator.stderr();
    expect(logged).toContain("summary key rotated");
    for (const k of [before, after]) {
      expect(logged).not.toContain(k.toString("hex"));
      expect(logged).not.toContain(k.toString("base64"));
    }
  });
});
