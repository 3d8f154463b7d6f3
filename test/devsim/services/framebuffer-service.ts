import type { Service } from "./service.js";

/** Version-1 header (52 bytes): what adbkit 3.3.9 parses; v2 would shift its fields. */
export function framebufferHeader(width: number, height: number): Buffer {
  const fields = [1, 32, width * height * 4, width, height, 0, 8, 16, 8, 8, 8, 24, 8];
  const out = Buffer.alloc(fields.length * 4);
  fields.forEach((value, index) => out.writeUInt32LE(value, index * 4));
  return out;
}

/** `framebuffer:`: header, raw RGBA_8888 pixels, close. */
export const framebufferService: Service = {
  prefixes: ["framebuffer:"],
  open(request) {
    return async (stream) => {
      const frame = await request.device.state.renderer.frame();
      await stream.write(framebufferHeader(frame.width, frame.height));
      for (let offset = 0; offset < frame.rgba.length && !stream.closed; offset += stream.maxPayload) {
        await stream.write(frame.rgba.subarray(offset, offset + stream.maxPayload));
      }
    };
  },
};
