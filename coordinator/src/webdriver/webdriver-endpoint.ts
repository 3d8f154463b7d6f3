import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { FARM_VERSION } from "@farm/shared/version";
import type { Logger } from "@farm/shared/log";
import { toErrorReport } from "@farm/shared/errors";
import { authenticate, requireSafeTransport } from "../auth/auth.js";
import type { TokenStore } from "../auth/token-store.js";
import { peerOf } from "../http/peer.js";
import { parseNewSession, type SessionRequest } from "./capabilities.js";
import { FarmCalls } from "./farm-calls.js";
import { webDriverErrorOf } from "./farm-error-map.js";
import { WebDriverError } from "./webdriver-error.js";
import { matchRoute, unsupportedCommands, webDriverPath, type CommandName } from "./webdriver-routes.js";
import type { WebDriverSession } from "./webdriver-session.js";

type Req = IncomingMessage | Http2ServerRequest;

let sessionClass: Promise<typeof WebDriverSession> | undefined;
/**
 * The session's module and its locators (XPath over xmldom, re2js), loaded
 * by the first WebDriver session: a coordinator nobody drives through
 * WebDriver never holds them (docs/performance.md, round 15).
 */
function webDriverSessionClass(): Promise<typeof WebDriverSession> {
  sessionClass ??= import("./webdriver-session.js").then((m) => m.WebDriverSession);
  return sessionClass;
}
type Res = ServerResponse | Http2ServerResponse;

/** A command's JSON body: commands carry small objects. */
export const WEBDRIVER_BODY_MAX_BYTES = 1024 * 1024;
/** An APK sent inline (base64 in JSON) to install: the one large body. */
export const WEBDRIVER_INSTALL_BODY_MAX_BYTES = 128 * 1024 * 1024;
/** Ended sessions remembered, so a late command hears why its session is gone. */
const ENDED_KEPT = 1000;
/** The lease outlives a pause between commands; it is renewed while the session lives. */
const MIN_LEASE_TTL_MS = 5 * 60_000;

export interface WebDriverDeps {
  tokens: TokenStore;
  /** The coordinator's own address, once it listens (the endpoint calls farm's services there, as the CLI does). */
  url(): string;
  /** The CA to verify the coordinator's own certificate with (its certificate file, under TLS). */
  caFile?: string | undefined;
  insecure: boolean;
  log: Logger;
}

interface Entry {
  session: WebDriverSession;
  calls: FarmCalls;
  tokenName: string;
  /** sha256 of the token that made the session: a later command's token must be the same. */
  tokenHash: Buffer;
  /** Made with an Authorization header: later commands must carry it too (farm:token sessions are bound to their id). */
  byHeader: boolean;
  leaseToken: string;
  idleMs: number;
  idleTimer?: NodeJS.Timeout;
  renewTimer?: NodeJS.Timeout;
  /** Commands run one at a time, in arrival order. */
  queue: Promise<unknown>;
  ending?: Promise<void>;
}

export interface WebDriverEndpoint {
  /** Serves a WebDriver request; false when the path is not WebDriver's. */
  handle(req: Req, res: Res): Promise<boolean>;
  /** Ends every session (its recorded session and lease): the coordinator is shutting down. */
  closeAll(): Promise<void>;
  /** Paths whose bodies may exceed the coordinator's plain-body cap (the endpoint applies its own). */
  bodyCapOf(pathname: string): number | undefined;
}

/**
 * W3C WebDriver on the coordinator's port, at /wd/hub and /: a new session
 * is a lease chosen by capabilities, each command one of farm's own calls
 * made with the caller's token.
 */
export function webDriverEndpoint(deps: WebDriverDeps): WebDriverEndpoint {
  const sessions = new Map<string, Entry>();
  const ended = new Map<string, string>();
  let closing = false;

  function remember(id: string, why: string): void {
    ended.set(id, why);
    if (ended.size > ENDED_KEPT) ended.delete(ended.keys().next().value as string);
  }

  function bodyCapOf(pathname: string): number | undefined {
    const path = webDriverPath(pathname);
    if (path === undefined) return undefined;
    return /\/(execute\/sync|appium\/device\/install_app)$/.test(path) ? WEBDRIVER_INSTALL_BODY_MAX_BYTES : WEBDRIVER_BODY_MAX_BYTES;
  }

  /** Ends a session: its recorded session, then its lease; remembers why for late commands. */
  function end(id: string, why: string, release = true): Promise<void> {
    const e = sessions.get(id);
    if (!e) return Promise.resolve();
    if (e.ending) return e.ending;
    clearTimeout(e.idleTimer);
    clearInterval(e.renewTimer);
    remember(id, why);
    e.ending = (async () => {
      try {
        if (e.session.recordedSessionId) await e.calls.sessions.endSession({ sessionId: e.session.recordedSessionId }, { timeoutMs: 10_000 });
      } catch (err) {
        deps.log.warn("webdriver: could not end the recorded session; it ends with its lease", { webdriverSession: id, error: toErrorReport(err).message });
      }
      if (release) {
        try {
          await e.calls.leases.releaseLease({ token: e.leaseToken }, { timeoutMs: 10_000 });
        } catch (err) {
          deps.log.warn("webdriver: could not release the session's lease; it expires at its TTL", { webdriverSession: id, leaseId: e.session.phone.leaseId, error: toErrorReport(err).message });
        }
      }
      sessions.delete(id);
      e.calls.close();
      deps.log.info("webdriver session ended", { webdriverSession: id, user: e.tokenName, serial: e.session.phone.serial, why });
    })();
    return e.ending;
  }

  function armIdle(id: string, e: Entry): void {
    clearTimeout(e.idleTimer);
    e.idleTimer = setTimeout(() => void end(id, `released after ${Math.round(e.idleMs / 1000)} s idle (appium:newCommandTimeout)`), e.idleMs);
    e.idleTimer.unref();
  }

  async function newSession(req: Req, res: Res, header: string | undefined): Promise<void> {
    const request = parseNewSession(await readJson(req, WEBDRIVER_BODY_MAX_BYTES));
    const token = header ?? request.token;
    if (token === undefined || token === "") throw new WebDriverError("session not created", "UNAUTHENTICATED: send the user token as Authorization: Bearer, or as the farm:token capability");
    if (header !== undefined && request.token !== undefined && request.token !== header) throw new WebDriverError("invalid argument", "INVALID_ARGUMENT: farm:token differs from the Authorization header's token");
    let principal;
    try {
      principal = await authenticate(deps.tokens, `Bearer ${token}`);
    } catch (err) {
      throw webDriverErrorOf(err, "new session");
    }
    if (principal.kind !== "user") throw new WebDriverError("session not created", "PERMISSION_DENIED: a WebDriver session needs a user token");
    if (closing) throw new WebDriverError("session not created", "COORDINATOR_SHUTTING_DOWN: the coordinator is shutting down");
    const calls = new FarmCalls(loopbackUrl(deps.url()), token, deps.caFile);
    const gone = new AbortController();
    const onClose = () => gone.abort();
    res.once("close", onClose);
    let leaseToken = "";
    try {
      const ttlMs = Math.max(MIN_LEASE_TTL_MS, request.newCommandTimeoutMs + 60_000);
      const granted = await calls.leases.acquireLease(
        { selector: request.selector, waitMs: request.waitMs, ttlMs, ticket: randomUUID() },
        // The caller leaving while it waits takes its place in the queue with it.
        { timeoutMs: request.waitMs + 30_000, signal: gone.signal },
      );
      const lease = granted.lease;
      if (!lease) throw new WebDriverError("session not created", "INTERNAL: the coordinator granted no lease");
      leaseToken = granted.token;
      calls.useLease(leaseToken);
      const phone = { serial: lease.serial, agent: lease.agentId, physicalId: lease.physicalId, leaseId: lease.leaseId };
      const props = await calls.device.getProperties({ target: { serial: phone.serial, agent: phone.agent } }, { timeoutMs: 30_000 }).then((r) => r.properties, () => ({} as Record<string, string>));
      let recordedId: string | undefined;
      if (request.sessionName !== undefined) {
        const started = await calls.sessions.startSession(
          { target: { serial: phone.serial, agent: phone.agent }, name: request.sessionName, policyJson: request.policyJson ?? "", secrets: request.secrets },
          { timeoutMs: 30_000 },
        );
        recordedId = started.session?.sessionId;
      }
      const id = randomUUID();
      const session = new (await webDriverSessionClass())(id, calls, phone, request.implicitWaitMs, recordedId);
      if (request.app) await session.startActivity(request.app.package, request.app.activity);
      if (gone.signal.aborted) throw new WebDriverError("session not created", "CALL_CANCELLED: the client left before its session was made");
      const entry: Entry = {
        session,
        calls,
        tokenName: principal.tokenName,
        tokenHash: sha256(token),
        byHeader: header !== undefined,
        leaseToken,
        idleMs: request.newCommandTimeoutMs,
        queue: Promise.resolve(),
      };
      sessions.set(id, entry);
      armIdle(id, entry);
      entry.renewTimer = setInterval(() => {
        void calls.leases.renewLease({ token: leaseToken, ttlMs }, { timeoutMs: 10_000 }).catch((err: unknown) => {
          const r = toErrorReport(err);
          // The lease is gone (released elsewhere, revoked, expired): so is the session.
          if (/^LEASE_/.test(r.code)) void end(id, `its lease ended: ${r.code}: ${r.message}`, false);
          else deps.log.warn("webdriver: could not renew the session's lease; the next renewal tries again", { webdriverSession: id, error: r.message });
        });
      }, Math.floor(ttlMs / 3));
      entry.renewTimer.unref();
      deps.log.info("webdriver session started", { webdriverSession: id, user: principal.tokenName, serial: phone.serial, physicalId: phone.physicalId, leaseId: phone.leaseId, recordedSession: recordedId });
      send(res, 200, { value: { sessionId: id, capabilities: answerCapabilities(request, phone, props, recordedId) } });
    } catch (err) {
      if (leaseToken !== "") await calls.leases.releaseLease({ token: leaseToken }, { timeoutMs: 10_000 }).catch(() => undefined);
      calls.close();
      throw webDriverErrorOf(err, "new session");
    } finally {
      res.off("close", onClose);
    }
  }

  /** The session a command names, if the caller may use it. */
  function sessionFor(id: string, header: string | undefined): Entry {
    const e = sessions.get(id);
    if (!e || e.ending) {
      const why = ended.get(id);
      throw new WebDriverError("invalid session id", why ? `SESSION_ENDED: session ${id} was ${why.startsWith("released") || why.startsWith("deleted") ? why : `ended: ${why}`}` : `SESSION_NOT_FOUND: no WebDriver session ${id}`);
    }
    if (header !== undefined ? !timingSafeEqual(sha256(header), e.tokenHash) : e.byHeader) {
      // Another token's session is not this caller's business, nor is its existence.
      throw new WebDriverError("invalid session id", `SESSION_NOT_FOUND: no WebDriver session ${id} for this token`);
    }
    return e;
  }

  async function command(name: CommandName, params: Record<string, string>, req: Req, res: Res, header: string | undefined): Promise<void> {
    const id = params["sessionId"] as string;
    const e = sessionFor(id, header);
    if (unsupportedCommands.has(name)) throw new WebDriverError("unsupported operation", `NOT_IMPLEMENTED: ${name} is not something farm does on a phone (docs/webdriver.md lists the commands)`);
    // Limits before bytes: the caller is known to own the session before its body is read.
    const body = req.method === "POST" ? await readJson(req, bodyCapOf(req.url ?? "") ?? WEBDRIVER_BODY_MAX_BYTES) : {};
    if (name === "deleteSession") {
      await end(id, "deleted by its client");
      send(res, 200, { value: null });
      return;
    }
    clearTimeout(e.idleTimer);
    const run = e.queue.then(() => runCommand(e.session, name, params, body as Record<string, unknown>));
    e.queue = run.catch(() => undefined);
    try {
      const value = await run;
      send(res, 200, { value: value ?? null });
    } finally {
      if (sessions.get(id) === e && !e.ending) armIdle(id, e);
    }
  }

  return {
    bodyCapOf,
    async handle(req, res) {
      const pathname = (req.url ?? "/").split("?", 1)[0] as string;
      const path = webDriverPath(pathname);
      if (path === undefined) return false;
      try {
        const route = matchRoute(req.method ?? "GET", path);
        if (route.kind === "unknown") throw new WebDriverError("unknown command", `NOT_FOUND: ${req.method} ${path} is not a WebDriver command farm knows`);
        if (route.kind === "wrong method") throw new WebDriverError("unknown method", `METHOD_NOT_ALLOWED: ${req.method} ${path}; this path takes ${route.allowed.join(", ")}`);
        if (route.command === "status") {
          send(res, 200, { value: { ready: !closing, message: closing ? "farm is shutting down" : `farm ${FARM_VERSION}: WebDriver sessions lease Android phones`, build: { version: FARM_VERSION } } });
          return true;
        }
        requireSafeTransport(peerOf(req), deps.insecure);
        const header = bearerOf(req.headers["authorization"]);
        if (route.command === "newSession") await newSession(req, res, header);
        else await command(route.command, route.params, req, res, header);
      } catch (err) {
        const wd = webDriverErrorOf(err);
        if (wd.httpStatus >= 500 && wd.code !== "session not created") deps.log.warn("webdriver command failed", { path: redactedPath(pathname), error: wd.message });
        if (!res.headersSent) {
          // A body left unread (too large): an HTTP/1.1 client reads the answer only once it has
          // written its body, so a closed connection would reach it as a write error (EPIPE), not as
          // the refusal. Up to DRAIN_MAX_BYTES announced, the rest is read and dropped (never kept);
          // past that, or without a length, the connection ends with the answer.
          const unread = req.httpVersionMajor === 1 && !req.readableEnded;
          const announced = Number(req.headers["content-length"] ?? NaN);
          const drain = unread && Number.isFinite(announced) && announced <= DRAIN_MAX_BYTES;
          if (drain) req.resume();
          send(res, wd.httpStatus, wd.toJSON(), unread && !drain);
        } else res.end();
      }
      return true;
    },
    async closeAll() {
      closing = true;
      await Promise.all([...sessions.keys()].map((id) => end(id, "ended: the coordinator shut down")));
    },
  };
}

async function runCommand(s: WebDriverSession, name: CommandName, p: Record<string, string>, body: Record<string, unknown>): Promise<unknown> {
  const el = p["elementId"] as string;
  switch (name) {
    case "getTimeouts":
      return s.timeouts();
    case "setTimeouts":
      return s.setTimeouts(body);
    case "findElement":
      return s.find(body, undefined, false);
    case "findElements":
      return s.find(body, undefined, true);
    case "findElementFromElement":
      return s.find(body, el, false);
    case "findElementsFromElement":
      return s.find(body, el, true);
    case "elementClick":
      return s.click(el);
    case "elementClear":
      return s.clear(el);
    case "elementSendKeys":
      return s.sendKeys(el, body);
    case "getElementText":
      return s.text(el);
    case "getElementAttribute":
    case "getElementProperty":
      return s.attribute(el, p["name"] as string);
    case "getElementRect":
      return s.rect(el);
    case "getElementTagName":
      return s.tagName(el);
    case "isElementDisplayed":
      return s.displayed(el);
    case "isElementEnabled":
      return s.enabled(el);
    case "isElementSelected":
      return s.selected(el);
    case "takeElementScreenshot":
      return s.elementScreenshot(el);
    case "performActions":
      return s.performActions(body);
    case "releaseActions":
      // farm holds no pressed keys or buttons between commands: there is nothing to release.
      return null;
    case "takeScreenshot":
      return s.screenshot();
    case "getPageSource":
      return s.pageSource();
    case "back":
      return s.back();
    case "getWindowRect":
      return s.windowRect();
    case "getWindowHandle":
      return "NATIVE_APP";
    case "executeScript":
      return executeScript(s, body);
    case "installApp":
      throw new WebDriverError(
        "unsupported operation",
        "NOT_IMPLEMENTED: installApp reads an app path on the server, which farm never does; send the APK's bytes: driver.execute('mobile: installApp', {apk: '<base64>'})",
      );
    case "activateApp":
      return s.activateApp(appIdOf(body));
    case "terminateApp":
      return s.terminateApp(appIdOf(body));
    case "isAppInstalled":
      return s.isAppInstalled(appIdOf(body));
    default:
      throw new WebDriverError("unknown command", `NOT_IMPLEMENTED: ${name}`);
  }
}

/** `execute/sync` with Appium's `mobile:` scripts; any other script is unsupported (there is no page to run it in). */
async function executeScript(s: WebDriverSession, body: Record<string, unknown>): Promise<unknown> {
  const script = body["script"];
  if (typeof script !== "string") throw new WebDriverError("invalid argument", "INVALID_ARGUMENT: script must be a string");
  const args = Array.isArray(body["args"]) ? body["args"] : [];
  const first = args[0];
  const a = typeof first === "object" && first !== null && !Array.isArray(first) ? (first as Record<string, unknown>) : {};
  switch (script.trim()) {
    case "mobile: shell":
      return s.mobileShell(a);
    case "mobile: installApp": {
      const apk = a["apk"];
      if (typeof apk !== "string" || apk === "" || !/^[A-Za-z0-9+/\r\n]+=*$/.test(apk)) {
        throw new WebDriverError("invalid argument", "INVALID_ARGUMENT: mobile: installApp takes {apk: the APK's bytes as base64}; a path is never read on the coordinator");
      }
      return s.installApk(Buffer.from(apk, "base64"));
    }
    case "mobile: activateApp":
      return s.activateApp(appIdOf(a));
    case "mobile: terminateApp":
      return s.terminateApp(appIdOf(a));
    case "mobile: isAppInstalled":
      return s.isAppInstalled(appIdOf(a));
    default:
      throw new WebDriverError(
        "unsupported operation",
        `NOT_IMPLEMENTED: execute script ${JSON.stringify(script.slice(0, 80))}: farm runs mobile: shell, mobile: installApp, mobile: activateApp, mobile: terminateApp and mobile: isAppInstalled`,
      );
  }
}

function appIdOf(body: Record<string, unknown>): string {
  const id = body["appId"] ?? body["bundleId"];
  if (typeof id !== "string") throw new WebDriverError("invalid argument", "INVALID_ARGUMENT: appId must be a package name");
  return id;
}

function answerCapabilities(request: SessionRequest, phone: { serial: string; physicalId: string; leaseId: string }, props: Record<string, string>, recordedId: string | undefined): Record<string, unknown> {
  const model = props["ro.product.model"];
  const release = props["ro.build.version.release"];
  return {
    ...request.asked,
    platformName: "Android",
    "appium:automationName": "farm",
    "appium:udid": phone.serial,
    // Unknown stays unknown: a property farm could not read is left out, not guessed.
    ...(model !== undefined ? { "appium:deviceName": model, "farm:model": model } : {}),
    ...(release !== undefined ? { "appium:platformVersion": release } : {}),
    "appium:newCommandTimeout": request.newCommandTimeoutMs / 1000,
    "farm:serial": phone.serial,
    "farm:physicalId": phone.physicalId,
    "farm:leaseId": phone.leaseId,
    ...(recordedId ? { "farm:sessionId": recordedId } : {}),
  };
}

function bearerOf(h: string | string[] | undefined): string | undefined {
  if (typeof h !== "string") return undefined;
  const m = /^Bearer\s+(\S+)$/i.exec(h);
  if (!m) throw new WebDriverError("invalid argument", "INVALID_ARGUMENT: the Authorization header must be `Bearer <token>`");
  return m[1] as string;
}

function sha256(s: string): Buffer {
  return createHash("sha256").update(s).digest();
}

/** The coordinator's own address on loopback (a listener on every address is dialled on 127.0.0.1). */
function loopbackUrl(url: string): string {
  const u = new URL(url);
  if (u.hostname === "0.0.0.0") u.hostname = "127.0.0.1";
  else if (u.hostname === "[::]") u.hostname = "[::1]";
  return u.toString().replace(/\/$/, "");
}

/** The most of a refused body read and dropped so that its client sees the refusal (see the handler's catch). */
const DRAIN_MAX_BYTES = 16 * 1024 * 1024;

/** Session and element ids are not secrets, but no path goes to the log with anything else either. */
function redactedPath(pathname: string): string {
  return pathname.slice(0, 200);
}

/** A JSON body, refused from its announced size and again while it arrives; what is read stays bounded. */
function readJson(req: Req, cap: number): Promise<unknown> {
  const announced = Number(req.headers["content-length"] ?? NaN);
  const tooLarge = () => new WebDriverError("invalid argument", `MESSAGE_TOO_LARGE: this command's body is at most ${cap} bytes${Number.isFinite(announced) ? `; the request announces ${announced}` : ""}`);
  if (Number.isFinite(announced) && announced > cap) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > cap) {
        done();
        // The rest is not read; the answer closes the connection (http: Connection: close; h2: the stream).
        req.pause();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      done();
      const text = Buffer.concat(chunks).toString("utf8");
      if (text.trim() === "") return resolve({});
      try {
        resolve(JSON.parse(text) as unknown);
      } catch (err) {
        reject(new WebDriverError("invalid argument", `INVALID_ARGUMENT: the body is not JSON: ${(err as Error).message}`));
      }
    };
    const onError = (err: Error) => {
      done();
      reject(err);
    };
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
  });
}

function send(res: Res, status: number, body: unknown, close = false): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "cache-control": "no-store", "content-length": Buffer.byteLength(text), ...(close ? { connection: "close" } : {}) });
  res.end(text);
}
