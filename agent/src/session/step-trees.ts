import type { DescMethodUnary } from "@bufbuild/protobuf";
import type { Redaction } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { createRedactor, type UiNode } from "@farm/shared/redaction/redactor";

/**
 * A session step's answer with every UI tree in it masked by the step's
 * redaction (its secrets, and the policy's labels and fields), as its
 * `elements.*` files are: a tree read (GetUiTree) and the element a tap by
 * selector resolved to (SendInput). Masked here, before the answer leaves
 * this host, so what the caller gets and what the session keeps agree.
 * Other answers, and steps with nothing to mask, are returned as they are.
 */
export function maskStepTrees(method: DescMethodUnary, output: unknown, redaction: Redaction | undefined): unknown {
  if (!redaction || (redaction.secrets.length === 0 && redaction.labels.length === 0 && redaction.fields.length === 0)) return output;
  if (method.localName !== "getUiTree" && method.localName !== "sendInput") return output;
  const r = createRedactor({ secrets: redaction.secrets, labels: redaction.labels, fields: redaction.fields });
  const o = output as { roots?: UiNode[]; element?: { element?: UiNode } };
  if (method.localName === "getUiTree" && Array.isArray(o.roots)) return { ...o, roots: r.uiTree(o.roots) };
  if (method.localName === "sendInput" && o.element?.element) return { ...o, element: { ...o.element, element: r.uiTree(o.element.element) } };
  return output;
}
