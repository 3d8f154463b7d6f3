export { flag, hidden, list, parsed, parsedWithDefault, requiredText, text, textWithDefault } from "./option-decl.js";
export { duration, durationIn, intIn, oneOf } from "./parsers.js";
