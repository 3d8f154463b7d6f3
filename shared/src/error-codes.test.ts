import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { Errors, Status } from "./error-codes.js";

describe("the error table without Connect", () => {
  it("uses Connect's status numbers", () => {
    for (const [name, value] of Object.entries(Status)) expect(value, name).toBe(Code[name as keyof typeof Code]);
    expect(Object.keys(Status)).toHaveLength(16);
  });

  it("gives every entry a status Connect knows", () => {
    for (const spec of Object.values(Errors)) expect(Code[spec.status], spec.code).toBeDefined();
  });
});
