import { describe, expect, it } from "vitest";
import { matchRoute, webDriverPath } from "./webdriver-routes.js";

describe("webdriver routes", () => {
  it("serves /wd/hub and / alike, and nothing else", () => {
    expect(webDriverPath("/wd/hub/session")).toBe("/session");
    expect(webDriverPath("/wd/hub/status")).toBe("/status");
    expect(webDriverPath("/session/abc/element/")).toBe("/session/abc/element");
    expect(webDriverPath("/status")).toBe("/status");
    expect(webDriverPath("/dashboard/")).toBeUndefined();
    expect(webDriverPath("/farm.v1.LeaseService/AcquireLease")).toBeUndefined();
    expect(webDriverPath("/sessions")).toBeUndefined();
  });

  it("matches commands with their parameters, URI-decoded", () => {
    expect(matchRoute("POST", "/session")).toEqual({ kind: "command", command: "newSession", params: {} });
    expect(matchRoute("GET", "/session/s1/element/e%2F1/attribute/content-desc")).toEqual({ kind: "command", command: "getElementAttribute", params: { sessionId: "s1", elementId: "e/1", name: "content-desc" } });
    expect(matchRoute("GET", "/session/s1/element/active")).toMatchObject({ command: "getActiveElement" });
    expect(matchRoute("DELETE", "/session/s1")).toMatchObject({ command: "deleteSession", params: { sessionId: "s1" } });
  });

  it("tells a wrong method from an unknown path", () => {
    expect(matchRoute("GET", "/session/s1/element")).toEqual({ kind: "wrong method", allowed: ["POST"] });
    expect(matchRoute("POST", "/session/s1/nope")).toEqual({ kind: "unknown" });
    expect(matchRoute("GET", "/session/s1/element/%E0%A4%A")).toEqual({ kind: "unknown" });
  });
});
