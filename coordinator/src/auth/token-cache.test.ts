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
});
