import { describe, expect, it } from "vitest";
import { idMatcher } from "./id-glob.js";

const ids = {
  checkout: "com.example.app:id/checkout_button",
  confirm: "com.example.app:id/checkout_confirm",
  pay: "com.example.app:id/pay",
  other: "com.other:id/checkout",
};
const matching = (glob: string) => Object.entries(ids).filter(([, id]) => idMatcher(glob)(id)).map(([k]) => k);

describe("idMatches globs", () => {
  it("match the resource id whole", () => {
    expect(matching("com.example.app:id/pay")).toEqual(["pay"]);
    expect(matching("com.example.app:id/checkout")).toEqual([]);
  });

  it("let * and ? match : and / (ids are names, not paths)", () => {
    expect(matching("*:id/checkout*")).toEqual(["checkout", "confirm", "other"]);
    expect(matching("*checkout*")).toEqual(["checkout", "confirm", "other"]);
    expect(matching("com.example.app*")).toEqual(["checkout", "confirm", "pay"]);
    expect(matching("com.example.app?id?pay")).toEqual(["pay"]);
    expect(matching("*")).toEqual(["checkout", "confirm", "pay", "other"]);
  });

  it("support braces, classes, escapes and a leading ! as picomatch does", () => {
    expect(matching("*:id/{pay,checkout_confirm}")).toEqual(["confirm", "pay"]);
    expect(matching("*[/]pay")).toEqual(["pay"]);
    expect(idMatcher("a\\*b")("a*b")).toBe(true);
    expect(idMatcher("a\\*b")("axb")).toBe(false);
    expect(matching("com.[eo]*:id/checkout")).toEqual(["other"]);
    expect(matching("!*checkout*")).toEqual(["pay"]);
  });

  it("are case-sensitive, and a dot is not special", () => {
    expect(matching("*CHECKOUT*")).toEqual([]);
    expect(matching("com.example.app:id/pa?")).toEqual(["pay"]);
    expect(matching("comXexample*")).toEqual([]);
  });

  it("never match an empty id (a tap at coordinates), not even *", () => {
    for (const g of ["*", "**", "!x", "?*"]) expect(idMatcher(g)(""), g).toBe(false);
  });
});
