import { describe, expect, it } from "vitest";
import { sqliteDatabase } from "../db/database.js";
import { type TokenRecordStore } from "./token-record-store.js";
import { AUTH_CACHE_MS, TokenStore } from "./token-store.js";
import { createTokenRecordStore } from "../db/stores.js";

/** A token store whose database lookups by hash are counted, on a clock the test moves. */
function counted() {
  const records = createTokenRecordStore(sqliteDatabase(":memory:"));
  const lookups = { n: 0 };
  const store: TokenRecordStore = Object.assign(Object.create(records) as TokenRecordStore, {
    byHash: (hash: string) => {
      lookups.n++;
      return records.byHash(hash);
    },
  });
  const clock = { now: 1_000 };
  return { tokens: new TokenStore(store, () => clock.now), records, lookups, clock };
}

describe("TokenStore: recently authenticated tokens", () => {
  it("asks the database once per token within the cache time, and again after it", async () => {
    const { tokens, lookups, clock } = counted();
    const { secret } = await tokens.create("ci", "user");
    expect(await tokens.authenticate(secret)).toMatchObject({ tokenName: "ci", role: "operator" });
    expect(await tokens.authenticate(secret)).toMatchObject({ tokenName: "ci" });
    expect(lookups.n).toBe(1);
    clock.now += AUTH_CACHE_MS;
    await tokens.authenticate(secret);
    expect(lookups.n).toBe(2);
  });

  it("refuses a token at once after it is revoked here, or forgotten for a revocation on another replica", async () => {
    const { tokens, records } = counted();
    const a = await tokens.create("a", "user");
    const b = await tokens.create("b", "user");
    await tokens.authenticate(a.secret);
    await tokens.authenticate(b.secret);
    await tokens.revoke("a");
    expect(await tokens.authenticate(a.secret)).toBe("revoked");
    // Another replica (its own TokenStore on the same database) revokes "b": this one still
    // remembers it as live, until the revocation notice makes it forget.
    await new TokenStore(records).revoke("b");
    expect(await tokens.authenticate(b.secret)).toMatchObject({ tokenName: "b" });
    tokens.forget("b");
    expect(await tokens.authenticate(b.secret)).toBe("revoked");
  });

  it("never remembers an unknown token", async () => {
    const { tokens, lookups } = counted();
    expect(await tokens.authenticate("farmu_nope")).toBe("unknown");
    expect(await tokens.authenticate("farmu_nope")).toBe("unknown");
    expect(lookups.n).toBe(2);
  });

  it("replicas: a revocation is answered once another replica that took the token as live just before refuses it, with no notice between them", async () => {
    // Two replicas' token stores on one database (real clocks); no change notice travels between them.
    const records = createTokenRecordStore(sqliteDatabase(":memory:"));
    const a = new TokenStore(records, undefined, true);
    const b = new TokenStore(records, undefined, true);
    const { secret } = await a.create("ci", "user");
    expect(await b.authenticate(secret)).toMatchObject({ tokenName: "ci" });
    await a.revoke("ci");
    await a.revokedEverywhere();
    expect(await b.authenticate(secret)).toBe("revoked");
    // Nothing left to wait for once it has passed; one coordinator alone (not shared) never waits: both
    // resolve before the event loop's next turn (no timer).
    const first = <T>(p: Promise<T>) => Promise.race([p.then(() => "resolved"), new Promise((r) => setImmediate(() => r("waiting")))]);
    expect(await first(a.revokedEverywhere())).toBe("resolved");
    const one = new TokenStore(records);
    await one.create("solo", "user");
    await one.revoke("solo");
    expect(await first(one.revokedEverywhere())).toBe("resolved");
  });
});
