/** One gRPC length-prefixed message as a peer would frame it: flags, a 4-byte length (announced, which a test may make lie), the bytes. */
export function grpcEnvelope(flags: number, payload: Uint8Array, announced = payload.length): Buffer {
  const b = Buffer.alloc(5 + payload.length);
  b[0] = flags;
  b.writeUInt32BE(announced, 1);
  b.set(payload, 5);
  return b;
}
