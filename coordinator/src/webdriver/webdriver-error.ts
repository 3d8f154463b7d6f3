// W3C WebDriver errors (https://www.w3.org/TR/webdriver2/#errors): the error
// code a client matches on and the HTTP status it arrives with. farm's own
// error code, when there is one, leads the message ("LEASE_WAIT_TIMEOUT: …").

const statusByCode = {
  "element click intercepted": 400,
  "element not interactable": 400,
  "insecure certificate": 400,
  "invalid argument": 400,
  "invalid cookie domain": 400,
  "invalid element state": 400,
  "invalid selector": 400,
  "invalid session id": 404,
  "javascript error": 500,
  "move target out of bounds": 500,
  "no such alert": 404,
  "no such cookie": 404,
  "no such element": 404,
  "no such frame": 404,
  "no such window": 404,
  "no such shadow root": 404,
  "script timeout": 500,
  "session not created": 500,
  "stale element reference": 404,
  "detached shadow root": 404,
  timeout: 500,
  "unable to set cookie": 500,
  "unable to capture screen": 500,
  "unexpected alert open": 500,
  "unknown command": 404,
  "unknown error": 500,
  "unknown method": 405,
  "unsupported operation": 500,
} as const;

export type WebDriverErrorCode = keyof typeof statusByCode;

export class WebDriverError extends Error {
  readonly code: WebDriverErrorCode;
  constructor(code: WebDriverErrorCode, message: string) {
    super(message);
    this.name = "WebDriverError";
    this.code = code;
  }

  get httpStatus(): number {
    return statusByCode[this.code];
  }

  /** The body W3C clients parse: `{ value: { error, message, stacktrace } }`. */
  toJSON(): { value: { error: string; message: string; stacktrace: string } } {
    return { value: { error: this.code, message: this.message, stacktrace: "" } };
  }
}

export function isWebDriverErrorCode(code: string): code is WebDriverErrorCode {
  return Object.hasOwn(statusByCode, code);
}
