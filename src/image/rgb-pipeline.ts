// The sharp pipeline every exact decode runs, whether its output goes to a buffer (decode.ts) or straight into a
// sidecar's slot file (frame-decode.ts): the alpha band dropped as is and the samples converted to sRGB, which
// keeps the most significant byte of 16-bit samples and replicates grey, exactly Pillow's unpackers. (The decode
// thread, pixel-thread.ts, runs from source text and spells the same two calls out.)
import sharp, { type Sharp, type SharpOptions } from 'sharp';

export function rgbPipeline(bytes: Buffer | Uint8Array, options: SharpOptions): Sharp {
  return sharp(bytes, options).removeAlpha().toColourspace('srgb');
}
