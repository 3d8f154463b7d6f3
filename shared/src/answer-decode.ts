import { fromBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { decodeListDevicesResponse } from "./list-devices-decode.js";

type OwnDecoder = <D extends DescMessage>(schema: D, bytes: Uint8Array) => MessageShape<D>;

/** Answers read by a decoder of farm's own (each tested against protobuf-es, result and error alike), by message type. */
const OWN_DECODERS: ReadonlyMap<string, OwnDecoder> = new Map([["farm.v1.ListDevicesResponse", decodeListDevicesResponse]]);

/** An answer message from its bytes: protobuf-es's `fromBinary`, or for a few large answers a decoder of farm's own that gives the same message. */
export function decodeAnswer<D extends DescMessage>(schema: D, bytes: Uint8Array): MessageShape<D> {
  const own = OWN_DECODERS.get(schema.typeName);
  return own ? own(schema, bytes) : fromBinary(schema, bytes);
}
