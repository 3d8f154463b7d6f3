export { flag, hidden, list, parsed, parsedWithDefault, requiredText, text, textWithDefault } from "./option-decl.js";
export { duration, intIn, oneOf } from "./parsers.js";
