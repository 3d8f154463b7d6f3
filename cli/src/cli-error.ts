/** The CLI's errors are the client library's FarmError (one class, one error table); CliError is its name here. */
export { FarmError as CliError } from "@farm/client/farm-error";
