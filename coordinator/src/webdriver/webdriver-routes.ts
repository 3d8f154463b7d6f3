/**
 * The WebDriver commands by HTTP method and path (W3C WebDriver 2 and the
 * Appium endpoints WebdriverIO's mobile commands use), relative to
 * /wd/hub or /. `:name` segments are parameters.
 */
const table = [
  ["POST", "/session", "newSession"],
  ["GET", "/status", "status"],
  ["DELETE", "/session/:sessionId", "deleteSession"],
  ["GET", "/session/:sessionId/timeouts", "getTimeouts"],
  ["POST", "/session/:sessionId/timeouts", "setTimeouts"],
  ["POST", "/session/:sessionId/element", "findElement"],
  ["POST", "/session/:sessionId/elements", "findElements"],
  ["POST", "/session/:sessionId/element/:elementId/element", "findElementFromElement"],
  ["POST", "/session/:sessionId/element/:elementId/elements", "findElementsFromElement"],
  ["POST", "/session/:sessionId/element/:elementId/click", "elementClick"],
  ["POST", "/session/:sessionId/element/:elementId/clear", "elementClear"],
  ["POST", "/session/:sessionId/element/:elementId/value", "elementSendKeys"],
  ["GET", "/session/:sessionId/element/:elementId/text", "getElementText"],
  ["GET", "/session/:sessionId/element/:elementId/attribute/:name", "getElementAttribute"],
  ["GET", "/session/:sessionId/element/:elementId/property/:name", "getElementProperty"],
  ["GET", "/session/:sessionId/element/:elementId/rect", "getElementRect"],
  ["GET", "/session/:sessionId/element/:elementId/name", "getElementTagName"],
  ["GET", "/session/:sessionId/element/:elementId/displayed", "isElementDisplayed"],
  ["GET", "/session/:sessionId/element/:elementId/enabled", "isElementEnabled"],
  ["GET", "/session/:sessionId/element/:elementId/selected", "isElementSelected"],
  ["GET", "/session/:sessionId/element/:elementId/screenshot", "takeElementScreenshot"],
  ["POST", "/session/:sessionId/actions", "performActions"],
  ["DELETE", "/session/:sessionId/actions", "releaseActions"],
  ["GET", "/session/:sessionId/screenshot", "takeScreenshot"],
  ["GET", "/session/:sessionId/source", "getPageSource"],
  ["POST", "/session/:sessionId/back", "back"],
  ["GET", "/session/:sessionId/window/rect", "getWindowRect"],
  ["GET", "/session/:sessionId/window", "getWindowHandle"],
  ["POST", "/session/:sessionId/execute/sync", "executeScript"],
  ["POST", "/session/:sessionId/appium/device/install_app", "installApp"],
  ["POST", "/session/:sessionId/appium/device/activate_app", "activateApp"],
  ["POST", "/session/:sessionId/appium/device/terminate_app", "terminateApp"],
  ["POST", "/session/:sessionId/appium/device/app_installed", "isAppInstalled"],
  // Known W3C commands farm does not do on a phone: answered "unsupported operation" by name, never a silent success.
  ["GET", "/session/:sessionId/url", "getCurrentUrl"],
  ["POST", "/session/:sessionId/url", "navigateTo"],
  ["POST", "/session/:sessionId/forward", "forward"],
  ["POST", "/session/:sessionId/refresh", "refresh"],
  ["GET", "/session/:sessionId/title", "getTitle"],
  ["POST", "/session/:sessionId/execute/async", "executeAsyncScript"],
  ["GET", "/session/:sessionId/cookie", "getAllCookies"],
  ["POST", "/session/:sessionId/cookie", "addCookie"],
  ["DELETE", "/session/:sessionId/cookie", "deleteAllCookies"],
  ["GET", "/session/:sessionId/window/handles", "getWindowHandles"],
  ["POST", "/session/:sessionId/window", "switchToWindow"],
  ["DELETE", "/session/:sessionId/window", "closeWindow"],
  ["POST", "/session/:sessionId/window/rect", "setWindowRect"],
  ["POST", "/session/:sessionId/frame", "switchToFrame"],
  ["POST", "/session/:sessionId/alert/accept", "acceptAlert"],
  ["POST", "/session/:sessionId/alert/dismiss", "dismissAlert"],
  ["GET", "/session/:sessionId/alert/text", "getAlertText"],
  ["GET", "/session/:sessionId/element/active", "getActiveElement"],
  ["POST", "/session/:sessionId/print", "printPage"],
] as const;

export type CommandName = (typeof table)[number][2];

/** Commands answered "unsupported operation": known, but not something farm does on a phone. */
export const unsupportedCommands: ReadonlySet<CommandName> = new Set<CommandName>([
  "getCurrentUrl",
  "navigateTo",
  "forward",
  "refresh",
  "getTitle",
  "executeAsyncScript",
  "getAllCookies",
  "addCookie",
  "deleteAllCookies",
  "getWindowHandles",
  "switchToWindow",
  "closeWindow",
  "setWindowRect",
  "switchToFrame",
  "acceptAlert",
  "dismissAlert",
  "getAlertText",
  "getActiveElement",
  "printPage",
]);

export type RouteMatch =
  | { kind: "command"; command: CommandName; params: Record<string, string> }
  /** The path is a command's, the method is not (W3C "unknown method"). */
  | { kind: "wrong method"; allowed: string[] }
  | { kind: "unknown" };

const compiled = table.map(([method, template, command]) => ({ method, parts: template.split("/").slice(1), command }));

/** The WebDriver part of a request path ("/wd/hub/session/…" or "/session/…"); undefined for other paths. */
export function webDriverPath(pathname: string): string | undefined {
  if (pathname === "/wd/hub" || pathname === "/wd/hub/") return "/";
  if (pathname.startsWith("/wd/hub/")) return pathname.slice("/wd/hub".length).replace(/\/$/, "") || "/";
  if (pathname === "/status" || pathname === "/session" || pathname.startsWith("/session/")) return pathname.replace(/\/$/, "");
  return undefined;
}

/** The command a method and WebDriver path name; parameters are URI-decoded. */
export function matchRoute(method: string, path: string): RouteMatch {
  const parts = path.split("/").slice(1);
  const allowed: string[] = [];
  for (const route of compiled) {
    if (route.parts.length !== parts.length) continue;
    const params: Record<string, string> = {};
    let ok = true;
    for (const [i, p] of route.parts.entries()) {
      const got = parts[i] as string;
      if (p.startsWith(":")) {
        let value: string;
        try {
          value = decodeURIComponent(got);
        } catch {
          ok = false;
          break;
        }
        if (value === "") {
          ok = false;
          break;
        }
        params[p.slice(1)] = value;
      } else if (p !== got) {
        ok = false;
        break;
      }
    }
    if (!ok) continue;
    // A fixed segment beats a parameter: /element/active is not an element id.
    if (route.method === method) return { kind: "command", command: route.command, params };
    allowed.push(route.method);
  }
  return allowed.length > 0 ? { kind: "wrong method", allowed } : { kind: "unknown" };
}
