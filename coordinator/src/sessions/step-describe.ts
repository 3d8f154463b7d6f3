import { toJson, type DescMethodUnary, type JsonObject, type Message } from "@bufbuild/protobuf";
import type { ErrorReport } from "@farm/shared/errors";
import type { Redactor } from "@farm/shared/redaction/redactor";
import type { SendInputRequest, SendInputResponse } from "@farm/shared/gen/farm/v1/device_service_pb";
import { cutStrings, MAX_STORED_RESPONSE_BYTES, type StepResultRecord } from "./step-record.js";

/** What a step is, in a word and a line. */
export interface StepDescription {
  action: string;
  description: string;
  /** The request as protobuf JSON without its target (the session names the phone), long strings cut. */
  arguments: JsonObject;
}

const OUTPUT_EXCERPT = 2000;
const q = (s: string, max = 120) => JSON.stringify(s.length > max ? `${s.slice(0, max)}…` : s);

/**
 * A copy of a message with every string masked (bytes are copied as they
 * are): what is described or cut is built from this, so no cut can leave a
 * secret's prefix, nor any quoting a spelling the mask does not know.
 */
function maskedMessage<T extends Message | undefined>(m: T, mask: Redactor | undefined): T {
  return mask && m ? (mask.json(m) as T) : m;
}

/**
 * The kind and human description of a routed call. `res` adds what only
 * the answer knows (where a tap by selector landed). With `mask`, the
 * request and answer are masked before anything is taken from them.
 */
export function describeStep(method: DescMethodUnary, rawReq: Message, rawRes?: Message, mask?: Redactor): StepDescription {
  const req = maskedMessage(rawReq, mask);
  const res = maskedMessage(rawRes, mask);
  const json = toJson(method.input, req, { alwaysEmitImplicit: false }) as JsonObject;
  delete json["target"];
  const args = cutStrings(json) as JsonObject;
  const r = req as unknown as Record<string, unknown>;
  switch (method.localName) {
    case "sendInput":
      return { ...inputDescription(req as SendInputRequest, res as SendInputResponse | undefined), arguments: args };
    case "runShell":
      return { action: "shell", description: `shell ${q(String(r["command"] ?? ""), 200)}`, arguments: args };
    case "setProperty":
      return { action: "setprop", description: `setprop ${String(r["key"])}=${q(String(r["value"] ?? ""), 100)}`, arguments: args };
    case "installApp":
      return { action: "install", description: `install APK (blob ${String(r["blobId"])})`, arguments: args };
    case "reboot":
      return { action: "reboot", description: "reboot", arguments: args };
    case "getAppEndpoint":
      return { action: "app-endpoint", description: `app endpoint of ${String(r["app"])}${r["wdaRunner"] ? ` (WDA ${String(r["wdaRunner"])})` : ""}`, arguments: args };
    case "removeAppForward":
      return { action: "remove-forward", description: `remove app forward tcp:${String(r["port"])}`, arguments: args };
    case "getUiTree":
      return { action: "ui-tree", description: r["appPackage"] ? `UI tree from ${String(r["appPackage"])}'s SDK` : "UI tree (UIAutomator)", arguments: args };
    case "captureEvidence":
      return { action: "evidence", description: `still evidence capture${r["label"] ? ` (${q(String(r["label"]), 80)})` : ""}`, arguments: args };
    default:
      return { action: method.localName, description: method.name, arguments: args };
  }
}

function inputDescription(req: SendInputRequest, res: SendInputResponse | undefined): { action: string; description: string } {
  const k = req.kind;
  switch (k.case) {
    case "tap": {
      const sel = k.value.element?.by;
      if (!sel?.case) return { action: "tap", description: `tap (${k.value.x}, ${k.value.y})` };
      const name = { resourceId: "id", text: "text", contentDesc: "desc" }[sel.case];
      const at = res?.element ? ` at (${res.element.x}, ${res.element.y})` : "";
      return { action: "tap", description: `tap ${name}=${q(sel.value)}${at}` };
    }
    case "swipe":
      return { action: "swipe", description: `swipe (${k.value.x1}, ${k.value.y1}) → (${k.value.x2}, ${k.value.y2})${k.value.durationMs ? ` in ${k.value.durationMs} ms` : ""}` };
    case "text":
      return { action: "text", description: `type ${q(k.value)}` };
    case "key":
      return { action: "key", description: `key ${k.value}` };
    default:
      return { action: "input", description: "input" };
  }
}

/** The result part of a step record from a method's answer, masked (`mask`) before it is cut. */
export function resultOf(method: DescMethodUnary, rawRes: Message, mask?: Redactor): StepResultRecord {
  const res = maskedMessage(rawRes, mask);
  let response = cutStrings(toJson(method.output, res, { alwaysEmitImplicit: false })) as JsonObject;
  if (Buffer.byteLength(JSON.stringify(response)) > MAX_STORED_RESPONSE_BYTES) response = { truncated: true, note: `the response is larger than ${MAX_STORED_RESPONSE_BYTES} bytes as JSON and was not kept` };
  const r = res as unknown as Record<string, unknown>;
  const out: StepResultRecord = { ok: true, response };
  if (typeof r["actionId"] === "string" && r["actionId"] !== "") out.actionId = r["actionId"];
  if (typeof r["dispatched"] === "boolean") out.dispatched = r["dispatched"];
  if (typeof r["ambiguous"] === "boolean") out.ambiguous = r["ambiguous"];
  if (method.localName === "runShell") {
    // Output is kept as text in the excerpt, not as base64 in the response.
    delete response["stdout"];
    delete response["stderr"];
    out.exitCode = Number(r["exitCode"]);
    // Bytes are not masked by the message's copy: the text is, whole, before its excerpt is cut.
    const bound = mask ? Infinity : OUTPUT_EXCERPT * 4;
    const output = `${text(r["stdout"], bound)}${text(r["stderr"], bound)}`;
    out.outputExcerpt = excerpt(mask ? mask.text(output) : output);
  }
  if (method.localName === "installApp") out.outputExcerpt = excerpt(String(r["output"] ?? ""));
  return out;
}

/** The result part of a step record from a failure. */
export function failureOf(report: ErrorReport): StepResultRecord {
  const out: StepResultRecord = { ok: false, errorCode: report.code, errorMessage: report.message };
  if (report.field) out.errorField = report.field;
  if (report.dispatched !== undefined) out.dispatched = report.dispatched;
  if (report.ambiguous !== undefined) out.ambiguous = report.ambiguous;
  if (report.actionId) out.actionId = report.actionId;
  return out;
}

function excerpt(t: string): string {
  return t.length <= OUTPUT_EXCERPT ? t : `${t.slice(0, OUTPUT_EXCERPT)}…`;
}

/** Bytes as text, at most `maxBytes` of them (all of them when they are masked: a cut would leave a secret's prefix). */
function text(v: unknown, maxBytes: number): string {
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, Math.min(v.byteLength, maxBytes)).toString("utf8");
  return typeof v === "string" ? v : "";
}
