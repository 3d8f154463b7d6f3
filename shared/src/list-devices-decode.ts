import { fromBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { readPlainPage } from "./list-devices-read.js";

/**
 * ListDevicesResponse from its bytes, as `fromBinary` makes it, in about
 * half the CPU and garbage: a whole 10,000-phone listing was the client's
 * largest cost (docs/performance.md, "ListDevices"). Written out for the
 * fields farm sends, with the messages' own shapes (create()'s field order,
 * message fields added as met). Anything else (an unknown field, a wire
 * type a field does not use, a varint or string it does not expect, bytes
 * that end early) hands the whole answer to `fromBinary`, so the result,
 * or the error, is always protobuf-es's own (tested against it,
 * differentially and on mutated bytes).
 */
export function decodeListDevicesResponse<D extends DescMessage>(schema: D, bytes: Uint8Array): MessageShape<D> {
  if (schema.typeName !== T_RESPONSE) throw new Error(`decodeListDevicesResponse reads ${T_RESPONSE}, not ${schema.typeName}`);
  return (readPlainPage(bytes) as MessageShape<D> | undefined) ?? fromBinary(schema, bytes);
}

export { readPlainPage };

const T_RESPONSE = "farm.v1.ListDevicesResponse";
