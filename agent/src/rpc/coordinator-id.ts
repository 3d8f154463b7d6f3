import { invalidArgument } from "@farm/shared/errors";

/** Ids the coordinator makes for tunnels and streams: short, printable, safe to journal and log. */
const ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** Refuses an id the coordinator would not have made, naming the field. */
export function checkCoordinatorId(id: string, field: string): void {
  if (!ID.test(id)) throw invalidArgument(field, id === "" ? `${field} is required` : `${field} must be 1-128 letters, digits, '.', '_', ':' or '-'`);
}
