import { Readable } from "node:stream";
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { RedactionSchema } from "../gen/farm/v1/agent_service_pb.js";
import { UiElementSchema } from "../gen/farm/v1/ui_pb.js";
import { createRedactor, mergeRedactionRules, REDACTION_MASK as M, type UiNode } from "./redactor.js";
import { secretForms } from "./secret-forms.js";

// A secret with every character the encoders treat specially, and non-ASCII.
const NASTY = `p@ss w/rd"'&<>é\n€+~`;

/** Deterministic PRNG, so property loops reproduce. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function throughStream(r: ReturnType<typeof createRedactor>, chunks: Buffer[]): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const c of Readable.from(chunks, { objectMode: false }).pipe(r.stream())) out.push(c as Buffer);
  return Buffer.concat(out);
}

const basic = (credential: string) => Buffer.from(credential, "utf8").toString("base64");

describe("text", () => {
  const r = createRedactor({ secrets: [NASTY, "hunter22"] });

  it("masks the literal and each encoded form, and none survives", () => {
    const expected = [
      NASTY,
      encodeURIComponent(NASTY),
      encodeURIComponent(NASTY).replace(/%20/g, "+"),
      encodeURIComponent(NASTY).replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase()),
      new URLSearchParams({ v: NASTY }).toString().slice(2),
      encodeURI(NASTY),
      NASTY.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;"),
      NASTY.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#x27;"),
      NASTY.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&#34;").replace(/'/g, "&#39;"),
      JSON.stringify(NASTY).slice(1, -1),
      JSON.stringify(NASTY).slice(1, -1).replace(/\//g, "\\/"),
      JSON.stringify(NASTY).slice(1, -1).replace(/é/g, "\\u00e9").replace(/€/g, "\\u20ac"),
      JSON.stringify(NASTY).slice(1, -1).replace(/é/g, "\\u00E9").replace(/€/g, "\\u20AC"),
    ];
    const forms = secretForms(NASTY);
    for (const form of expected) expect(forms).toContain(form);
    for (const form of forms) {
      const out = r.text(`before ${form} after`);
      expect(out).toBe(`before ${M} after`);
      expect(out).not.toContain(form);
    }
    // All forms in one text, and inside a JSON document and a URL.
    const all = r.text(forms.join(" | "));
    for (const form of forms) expect(all).not.toContain(form);
    expect(r.text(JSON.stringify({ cmd: `login --password ${NASTY}` }))).toBe(`{"cmd":"login --password ${M}"}`);
    expect(r.text(`https://h/cb?pw=${encodeURIComponent(NASTY)}&x=1`)).toBe(`https://h/cb?pw=${M}&x=1`);
    // A JSON string quoted again (an error message quoting a JSON argument, a JSON file kept inside JSON).
    const twice = JSON.stringify(JSON.stringify({ pw: NASTY }));
    expect(r.text(twice)).toBe(JSON.stringify(JSON.stringify({ pw: M })));
  });

  it("leaves text without secrets byte-identical", () => {
    const next = rng(1);
    const alphabet = "abcdefhnrtu2 \n\t%&;\\\"'<>é€😀Basic ";
    for (let i = 0; i < 300; i++) {
      const s = Array.from({ length: Math.floor(next() * 200) }, () => alphabet[Math.floor(next() * alphabet.length)]).join("");
      expect(r.text(s)).toBe(s);
    }
    const near = `hunter2 hunter2_ HUNTER22 hunte r22 Authorization: Basic ${basic("user:other")} Basic auth enabled`;
    expect(r.text(near)).toBe(near);
    expect(r.text("")).toBe("");
  });

  it("masks a secret that contains another whole, and overlapping secrets as one", () => {
    const nested = createRedactor({ secrets: ["abcd1234", "xxabcd1234yy"] });
    expect(nested.text("<xxabcd1234yy> <abcd1234>")).toBe(`<${M}> <${M}>`);
    const overlap = createRedactor({ secrets: ["abcdef12", "ef12ghij"] });
    expect(overlap.text("=abcdef12ghij=")).toBe(`=${M}=`);
    expect(overlap.text("=abcdef12=ef12ghij=")).toBe(`=${M}=${M}=`);
  });

  it("masks a Basic token whose credential holds a secret, in any case and setting", () => {
    const token = basic("ci:hunter22");
    expect(r.text(`Authorization: Basic ${token}`)).toBe(`Authorization: Basic ${M}`);
    expect(r.text(`D/OkHttp( 123): PROXY-AUTHORIZATION: BASIC  ${token}\r\nHost: x`)).toBe(`D/OkHttp( 123): PROXY-AUTHORIZATION: BASIC  ${M}\r\nHost: x`);
    expect(r.text(`{"authorization":"basic ${token}"}`)).toBe(`{"authorization":"basic ${M}"}`);
    expect(r.text(`Basic ${basic("hunter22:x")}`)).toBe(`Basic ${M}`); // the secret as the user name
    expect(r.text(`Basic ${basic(`u:${NASTY}`)}`)).toBe(`Basic ${M}`);
    expect(r.text(`Basic ${basic("u:pw=hunter22").replace(/=+$/, "")}`)).toBe(`Basic ${M}`); // padding dropped
    expect(r.text(`Basic ${Buffer.from("u:x?hunter22~>").toString("base64url")}`)).toBe(`Basic ${M}`);
    // Not ours: left alone, but a literal secret in the token text is still masked.
    const other = basic("user:password1");
    expect(r.text(`Authorization: Basic ${other}`)).toBe(`Authorization: Basic ${other}`);
    expect(r.text("Basic zzhunter22zz")).toBe(`Basic zz${M}zz`);
    // A secret inside the "Basic " prefix takes the prefix with it.
    expect(createRedactor({ secrets: ["hunter22", "asic"] }).text(`Basic ${token}`)).toBe(M);
  });

  it("refuses secrets that would mask ordinary text, without echoing them", () => {
    for (const bad of ["", "abc", "€€€", "    ", "\t\n \n"]) {
      let message = "";
      try {
        createRedactor({ secrets: ["fine-secret", bad] });
      } catch (err) {
        message = String(err);
      }
      expect(message).toMatch(/secret #2/);
      if (bad.trim() !== "") expect(message).not.toContain(bad);
    }
    expect(() => createRedactor({ secrets: ["abcd"] })).not.toThrow();
    expect(createRedactor({ secrets: [] }).text("anything")).toBe("anything");
  });

  it("survives random secrets in random encodings", () => {
    const next = rng(7);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)] as T;
    const chars = "abcXYZ019 /+=&<>\"'%\\\né€😀";
    for (let round = 0; round < 40; round++) {
      const secrets = Array.from({ length: 1 + Math.floor(next() * 5) }, () => Array.from({ length: 4 + Math.floor(next() * 12) }, () => pick([...chars])).join(""));
      const red = createRedactor({ secrets });
      const parts: string[] = [];
      for (let i = 0; i < 10; i++) parts.push(pick(["log line ", "\n", " x=", "&y=", "\"k\":\""]), pick(secretForms(pick(secrets))));
      const out = red.text(parts.join(""));
      // The mask replaces every occurrence; what is left cannot contain a literal secret.
      for (const s of secrets) expect(out).not.toContain(s);
    }
  });
});

describe("stream", () => {
  const r = createRedactor({ secrets: ["hunter22", "sëcrét€😀x"] });

  it("masks a secret split at every possible chunk boundary", async () => {
    const text = `I/App: token=hunter22; pw="sëcrét€😀x" auth=Basic ${basic("u:hunter22")} done\n`;
    const bytes = Buffer.from(text);
    const expected = Buffer.from(r.text(text));
    expect(expected.toString()).toBe(`I/App: token=${M}; pw="${M}" auth=Basic ${M} done\n`);
    for (let i = 0; i <= bytes.length; i++) {
      const out = await throughStream(r, [bytes.subarray(0, i), bytes.subarray(i)]);
      expect(out.equals(expected), `split at byte ${i}`).toBe(true);
    }
  });

  it("matches text() over every two-cut split and one-byte chunks", () => {
    const text = `x sëcrét€😀x hunter22hunter22 é😀 Basic ${basic("a:sëcrét€😀x")}`;
    const expected = r.text(text);
    for (let i = 0; i <= text.length; i++) {
      for (let j = i; j <= text.length; j++) {
        const inc = r.incremental();
        const out = inc.push(text.slice(0, i)) + inc.push(text.slice(i, j)) + inc.push(text.slice(j)) + inc.end();
        expect(out).toBe(expected);
      }
    }
    const inc = r.incremental();
    expect([...text].map((c) => inc.push(c)).join("") + inc.end()).toBe(expected);
  });

  it("masks overlapping secrets and long Basic tokens split anywhere", () => {
    // Short needles, so the held-back tail is shorter than the Basic token.
    const red = createRedactor({ secrets: ["abcdefghijkl1234", "1234mnopqrstuvwx", "hunter22"] });
    const token = basic("a-rather-long-ci-user-name@example.com:hunter22");
    const text = `<abcdefghijkl1234mnopqrstuvwx> Authorization: Basic ${token}\n<1234mnopqrstuvwx>`;
    const expected = `<${M}> Authorization: Basic ${M}\n<${M}>`;
    expect(red.text(text)).toBe(expected);
    for (let i = 0; i <= text.length; i++) {
      for (let j = i; j <= text.length; j++) {
        const inc = red.incremental();
        expect(inc.push(text.slice(0, i)) + inc.push(text.slice(i, j)) + inc.push(text.slice(j)) + inc.end(), `cuts ${i} ${j}`).toBe(expected);
      }
    }
  });

  it("keeps multi-byte characters and invalid UTF-8 around a secret intact", async () => {
    const bytes = Buffer.concat([Buffer.from("é😀"), Buffer.from([0xff, 0xc3]), Buffer.from("sëcrét€😀x€"), Buffer.from([0xe2, 0x82]), Buffer.from("\n")]);
    const expected = Buffer.concat([Buffer.from("é😀"), Buffer.from([0xff, 0xc3]), Buffer.from(`${M}€`), Buffer.from([0xe2, 0x82]), Buffer.from("\n")]);
    for (let i = 0; i <= bytes.length; i++) {
      const out = await throughStream(r, [bytes.subarray(0, i), bytes.subarray(i)]);
      expect(out.equals(expected), `split at byte ${i}`).toBe(true);
    }
    const single = await throughStream(r, [...bytes].map((b) => Buffer.from([b])));
    expect(single.equals(expected)).toBe(true);
  });

  it("passes bytes through unchanged when there is nothing to mask", async () => {
    const bytes = Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 131) % 256));
    expect((await throughStream(r, [bytes.subarray(0, 1000), bytes.subarray(1000)])).equals(bytes)).toBe(true);
    expect((await throughStream(createRedactor({ secrets: [] }), [bytes])).equals(bytes)).toBe(true);
  });

  it("equals text() on random chunkings of a long log", async () => {
    const next = rng(3);
    const lines = Array.from({ length: 400 }, (_, i) => `01-02 03:04:05.${i} I/Tag: ${i % 7 === 0 ? "k=hunter22" : i % 11 === 0 ? encodeURIComponent("sëcrét€😀x") : "nothing"} é\n`);
    const text = lines.join("");
    const bytes = Buffer.from(text);
    const chunks: Buffer[] = [];
    for (let at = 0; at < bytes.length;) {
      const n = 1 + Math.floor(next() * 40);
      chunks.push(bytes.subarray(at, at + n));
      at += n;
    }
    expect((await throughStream(r, chunks)).toString()).toBe(r.text(text));
  });
});

describe("headers", () => {
  it("masks the default set in any case, cookies as one group, keeping an auth scheme", () => {
    const r = createRedactor({ secrets: ["hunter22"] });
    const out = r.headers({
      Authorization: "Bearer abc.def",
      "proxy-authorization": "Basic Zm9vOmJhcg==",
      Cookie: "sid=1",
      "SET-COOKIE": ["a=1", "b=2"],
      "X-Api-Key": "k1",
      "x-auth-token": "t1",
      Accept: "text/html",
      "X-Note": "pw is hunter22",
    });
    expect(out).toEqual({
      Authorization: `Bearer ${M}`,
      "proxy-authorization": `Basic ${M}`,
      Cookie: M,
      "SET-COOKIE": [M, M],
      "X-Api-Key": M,
      "x-auth-token": M,
      Accept: "text/html",
      "X-Note": `pw is ${M}`,
    });
  });

  it("adds configured headers and honours unmaskHeaders, as pairs too", () => {
    const r = createRedactor({ secrets: ["hunter22"], headers: ["X-Session"], unmaskHeaders: ["cookie", "X-API-KEY"] });
    const out = r.headers([
      ["x-session", "s1"],
      ["Set-Cookie", "a=hunter22"],
      ["cookie", "c=1"],
      ["x-api-key", "k"],
      ["authorization", "tokenonly"],
    ]);
    expect(out).toEqual([
      ["x-session", M],
      ["Set-Cookie", `a=${M}`],
      ["cookie", "c=1"],
      ["x-api-key", "k"],
      ["authorization", M],
    ]);
    // Named both ways: masked.
    expect(createRedactor({ secrets: [], headers: ["x-api-key"], unmaskHeaders: ["x-api-key"] }).headers({ "x-api-key": "k" })).toEqual({ "x-api-key": M });
  });
});

describe("json", () => {
  const r = createRedactor({ secrets: ["hunter22"], fields: ["Password", "otp"], unmaskHeaders: ["cookie"] });

  it("masks configured fields at any depth, header objects, and secrets in every string", () => {
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47]);
    const input = {
      user: "ci",
      PASSWORD: "x",
      nested: [{ otp: 123456, note: "pw hunter22" }, { otp: null }],
      request: { url: "https://h/?k=hunter22", headers: { Authorization: "Bearer t", Cookie: "a=1", "X-Other": "hunter22" } },
      har: { headers: [{ name: "authorization", value: "Basic eA==" }, { name: "accept", value: "*/*" }] },
      pairs: { headers: [["x-auth-token", "t"]] },
      screenshot: png,
      hunter22: true,
    };
    const before = structuredClone(input);
    const out = r.json(input) as Record<string, unknown>;
    expect(out).toEqual({
      user: "ci",
      PASSWORD: M,
      nested: [{ otp: M, note: `pw ${M}` }, { otp: null }],
      request: { url: `https://h/?k=${M}`, headers: { Authorization: `Bearer ${M}`, Cookie: "a=1", "X-Other": M } },
      har: { headers: [{ name: "authorization", value: `Basic ${M}` }, { name: "accept", value: "*/*" }] },
      pairs: { headers: [["x-auth-token", M]] },
      screenshot: png,
      [M]: true,
    });
    expect(out["screenshot"]).not.toBe(png);
    expect(input).toEqual(before);
  });

  it("copies scalars and survives cycles", () => {
    expect(r.json("hunter22")).toBe(M);
    expect(r.json(5)).toBe(5);
    const a: Record<string, unknown> = { k: "v" };
    a["self"] = a;
    expect(r.json(a)).toEqual({ k: "v", self: "[circular]" });
  });
});

describe("uiTree", () => {
  const r = createRedactor({ secrets: ["hunter22"], labels: ["password", "com.bank:id/pin", "Card number"] });

  it("masks the text of labelled nodes and secrets anywhere, keeping generated messages", () => {
    const root = create(UiElementSchema, {
      type: "android.widget.FrameLayout",
      children: [
        { type: "android.widget.EditText", resourceId: "com.app:id/password", text: "s3cr3t!" },
        { type: "android.widget.EditText", resourceId: "com.bank:id/pin", text: "1234" },
        { type: "android.widget.EditText", resourceId: "com.other:id/pin", text: "5678" },
        { type: "android.widget.EditText", contentDesc: "Card number", text: "4111 1111" },
        { type: "android.widget.EditText", resourceId: "com.app:id/password", text: "" },
        { type: "android.widget.TextView", text: "Welcome hunter22", bounds: { left: 1, top: 2, right: 3, bottom: 4 } },
      ],
    });
    const out = r.uiTree(root);
    expect(out.$typeName).toBe("farm.v1.UiElement");
    expect(out.children.map((c) => c.text)).toEqual([M, M, "5678", M, "", `Welcome ${M}`]);
    expect(out.children[5]?.bounds).toEqual(root.children[5]?.bounds);
    expect(out.children[1]?.$typeName).toBe("farm.v1.UiElement");
    expect(root.children[0]?.text).toBe("s3cr3t!");
  });

  it("takes plain init shapes and lists of roots", () => {
    const roots: UiNode[] = [{ text: "password", children: [{ resourceId: "password", text: "pw hunter22", children: [] }] }, { contentDesc: "hunter22" }];
    expect(r.uiTree(roots)).toEqual([{ text: M, children: [{ resourceId: "password", text: M, children: [] }] }, { contentDesc: M }]);
    // An empty label matches nothing (not every node without a description).
    expect(createRedactor({ secrets: [], labels: ["", " "] }).uiTree({ text: "visible", contentDesc: "" })).toEqual({ text: "visible", contentDesc: "" });
  });

  it("masks a node's string attributes named by fields, and leaves bounds and flags their type", () => {
    const f = createRedactor({ secrets: [], fields: ["contentDesc", "bounds", "enabled"] });
    const root = create(UiElementSchema, { contentDesc: "account 12345", text: "shown", enabled: true, bounds: { left: 1, top: 2, right: 3, bottom: 4 }, children: [{ contentDesc: "card 4111" }, { contentDesc: "" }] });
    const out = f.uiTree(root);
    expect([out.contentDesc, out.children[0]?.contentDesc, out.children[1]?.contentDesc]).toEqual([M, M, ""]);
    expect(out).toMatchObject({ text: "shown", enabled: true, bounds: { left: 1, top: 2, right: 3, bottom: 4 } });
  });

  it("masks labelled elements inside a JSON document (a wait's diagnosis), flattened or nested", () => {
    const doc = {
      selector: { text: "Sign in" },
      elements: [{ type: "t", text: "1234", resourceId: "com.bank:id/pin", contentDesc: "" }],
      tree: [{ text: "", resourceId: "", children: [{ text: "4111", resourceId: "", contentDesc: "Card number" }] }],
    };
    expect(r.json(doc)).toEqual({
      selector: { text: "Sign in" },
      elements: [{ type: "t", text: M, resourceId: "com.bank:id/pin", contentDesc: "" }],
      tree: [{ text: "", resourceId: "", children: [{ text: M, resourceId: "", contentDesc: "Card number" }] }],
    });
  });
});

describe("mergeRedactionRules", () => {
  it("unions policy and site config, de-duplicated", () => {
    const policy = create(RedactionSchema, { secrets: ["s1-secret"], labels: ["pin"], fields: ["password"], headers: ["X-Session"] });
    const merged = mergeRedactionRules(policy, { secrets: ["s1-secret", "s2-secret"], labels: ["pin", "cvv"], fields: ["PASSWORD", "otp"], headers: ["x-session"], unmaskHeaders: ["cookie"] });
    expect(merged).toEqual({
      secrets: ["s1-secret", "s2-secret"],
      labels: ["pin", "cvv"],
      fields: ["password", "otp"],
      headers: ["X-Session"],
      unmaskHeaders: ["cookie"],
    });
    expect(createRedactor(merged).text("s1-secret s2-secret")).toBe(`${M} ${M}`);
  });
});
