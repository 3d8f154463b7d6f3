import { getOption, type DescMethod } from "@bufbuild/protobuf";
import { Access, rules, type MethodRules } from "./gen/farm/v1/method_rules_pb.js";

export { Access };

const cache = new WeakMap<DescMethod, MethodRules>();

/**
 * What a method declares about itself in the schema (farm.v1.rules): who may
 * call it, whether it changes a phone, and so on. A method without the
 * option gets the empty rules (ACCESS_UNSPECIFIED: refused).
 */
export function rulesOf(method: DescMethod): MethodRules {
  let r = cache.get(method);
  if (r === undefined) {
    r = getOption(method, rules);
    cache.set(method, r);
  }
  return r;
}

/** `package.Service/Method`, the name a method is routed and ruled by. */
export function methodPath(method: DescMethod): string {
  return `${method.parent.typeName}/${method.name}`;
}
