// Decodes untrusted image bytes to 8-bit RGB at the original size, with the semantics of the reference's
// `PIL.Image.open(f).convert("RGB")` (Pillow 9.4), so that pixel_values and boxes match the reference:
//
// * alpha is DROPPED, never composited onto a background (RGBA, LA, palette with tRNS);
// * palette and greyscale (1/2/4/8-bit) are expanded to RGB (grey g -> (g, g, g));
// * 16-bit RGB, RGBA and grey+alpha keep the high byte (v >> 8), as Pillow's "RGB;16B"/"LA;16B" unpackers do;
// * 16-bit grey WITHOUT alpha is CLIPPED to 0..255 (min(v, 255)), not scaled: Pillow opens it as mode "I" and
//   `convert("RGB")` clips ("i2rgb"). Surprising, but it is what the reference computes;
// * EXIF orientation is NOT applied: Pillow's `Image.open` ignores it, so boxes are in the stored pixel grid
//   (a phone JPEG tagged "rotate 90" is detected as stored, sideways). sharp only rotates when asked, and we don't;
// * embedded ICC profiles are ignored (`ignoreIcc`), as Pillow's convert does; CMYK JPEGs are the one exception
//   that is not PIL-exact: sharp converts them to sRGB with its default CMYK profile.
// * Animated GIF/WebP and multi-page TIFF: the first frame, as `Image.open` gives.
// * Always the full-resolution decode: sharp never resizes here, so no shrink-on-load (`fastShrinkOnLoad`, JPEG
//   DCT scaling) can change the pixels; the only resize is preprocess.ts.
//
// Limits: sides up to MAX_IMAGE_SIDE and input up to MAX_IMAGE_BYTES. The header is read first (sharp
// `metadata()`, no pixel allocation), so a decompression bomb (a tiny file declaring 20000x20000) is refused
// before anything is decoded; `limitInputPixels` is set from the same limit as a second line of defence.
// Everything runs in sharp's (libuv) thread pool: the event loop is never blocked for the decode.
import sharp, { type Metadata, type SharpOptions } from 'sharp';
import { RfdetrError } from '../errors.ts';

import { MAX_IMAGE_BYTES, MAX_IMAGE_SIDE } from './limits.ts';

export { MAX_IMAGE_BYTES, MAX_IMAGE_SIDE };

/** 8-bit RGB, interleaved, row-major: data.length === width * height * 3. */
export interface RgbImage {
  data: Uint8Array;
  width: number;
  height: number;
}

/** Formats decoded; SVG/PDF and the rest are refused (SVG rendering is not what the reference does). */
const ACCEPTED_FORMATS = new Set(['jpeg', 'png', 'webp', 'gif', 'tiff']);
const ACCEPTED_TEXT = 'PNG, JPEG, WebP, GIF or TIFF';

function undecodable(what: string, cause?: unknown): RfdetrError {
  return new RfdetrError('E_IMAGE_UNDECODABLE', `image could not be decoded: ${what}; expected a ${ACCEPTED_TEXT} file`, undefined, { cause });
}

function mib(n: number): string {
  return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
}

/** The checks decodeImage makes before parsing: throws E_IMAGE_UNDECODABLE for 0 bytes, E_IMAGE_TOO_LARGE past 32 MiB. */
export function checkImageBytes(bytes: Buffer | Uint8Array): void {
  if (bytes.length === 0) throw undecodable('the image is empty (0 bytes)');
  if (bytes.length > MAX_IMAGE_BYTES) {
    throw new RfdetrError('E_IMAGE_TOO_LARGE', `image is too large: ${bytes.length} bytes (${mib(bytes.length)}); the limit is ${MAX_IMAGE_BYTES} bytes (32 MiB)`, { bytes: bytes.length, limit: MAX_IMAGE_BYTES });
  }
}

/**
 * Decodes PNG/JPEG/WebP/GIF/TIFF bytes to RGB u8. Throws RfdetrError E_IMAGE_UNDECODABLE (empty, truncated,
 * corrupt, not an image, unsupported format) or E_IMAGE_TOO_LARGE (bytes > MAX_IMAGE_BYTES, a side > MAX_IMAGE_SIDE).
 */
export interface DecodeOptions {
  /**
   * Called with the number of bytes the decoded pixels will take, after the header was read and before any
   * pixel is decoded; the decode waits for it (a memory budget shared by concurrent decodes) and fails with it.
   */
  reserve?: (bytes: number, size: { width: number; height: number }) => Promise<void>;
}

export async function decodeImage(bytes: Buffer | Uint8Array, opts: DecodeOptions = {}): Promise<RgbImage> {
  checkImageBytes(bytes);
  const options: SharpOptions = {
    limitInputPixels: MAX_IMAGE_SIDE * MAX_IMAGE_SIDE,
    // 'error' rejects truncated and corrupt data (Pillow raises on truncated files) but tolerates libjpeg/libpng
    // warnings such as extraneous bytes, which Pillow also reads.
    failOn: 'error',
    ignoreIcc: true,
    autoOrient: false,
    sequentialRead: true,
  };
  let meta: Metadata;
  try {
    // Header only (no pixels are decoded), without the pixel limit so that an oversized image is reported with
    // its size as E_IMAGE_TOO_LARGE below rather than as sharp's generic "exceeds pixel limit".
    meta = await sharp(bytes, { ...options, limitInputPixels: false }).metadata();
  } catch (e) {
    throw undecodable(`${bytes.length} bytes that are not a readable image (${(e as Error).message.trim()})`, e);
  }
  if (!ACCEPTED_FORMATS.has(meta.format)) throw undecodable(`the format '${meta.format}' is not accepted`);
  const { width, height } = meta;
  if (!(width > 0 && height > 0)) throw undecodable(`the header declares a ${width}x${height} image`);
  if (width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE) {
    throw new RfdetrError('E_IMAGE_TOO_LARGE', `image is too large: ${width}x${height} pixels; each side must be at most ${MAX_IMAGE_SIDE} pixels`, { width, height, limit: MAX_IMAGE_SIDE });
  }
  // 16-bit grey passes through a 2-byte-per-pixel buffer before the RGB one.
  const grey16 = meta.depth === 'ushort' && meta.channels === 1;
  if (opts.reserve) await opts.reserve(width * height * (grey16 ? 5 : 3), { width, height });
  try {
    if (grey16) return await decodeGrey16(bytes, options, width, height);
    // 8-bit and the 16-bit RGB/RGBA/LA cases: sharp's conversion to sRGB keeps the most significant byte of
    // 16-bit samples and replicates grey, exactly Pillow's unpackers; removeAlpha drops the alpha band as is.
    const { data, info } = await sharp(bytes, options).removeAlpha().toColourspace('srgb').raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
    if (info.channels !== 3 || info.width !== width || info.height !== height || data.length !== width * height * 3) {
      throw new Error(`sharp returned ${info.width}x${info.height}x${info.channels} for a ${width}x${height} ${meta.format}`);
    }
    return { data: new Uint8Array(data.buffer, data.byteOffset, data.length), width, height };
  } catch (e) {
    if (e instanceof RfdetrError) throw e;
    throw undecodable(`the ${meta.format} data is corrupt or truncated (${(e as Error).message.trim()})`, e);
  }
}

/** 16-bit grey without alpha: Pillow mode "I", and convert("RGB") clips each value to 0..255. */
async function decodeGrey16(bytes: Buffer | Uint8Array, options: SharpOptions, width: number, height: number): Promise<RgbImage> {
  const { data, info } = await sharp(bytes, options).toColourspace('grey16').raw({ depth: 'ushort' }).toBuffer({ resolveWithObject: true });
  const n = width * height;
  if (info.channels !== 1 || data.length !== n * 2) throw new Error(`sharp returned ${info.width}x${info.height}x${info.channels} (${data.length} bytes) for a 16-bit grey ${width}x${height}`);
  const src = data.byteOffset % 2 === 0 ? new Uint16Array(data.buffer, data.byteOffset, n) : new Uint16Array(data.buffer.slice(data.byteOffset, data.byteOffset + n * 2));
  const out = new Uint8Array(n * 3);
  // At most 8192^2 values: chunked so a probe waits at most a few ms between chunks.
  const CHUNK = 1 << 20;
  for (let start = 0; start < n; start += CHUNK) {
    const end = Math.min(n, start + CHUNK);
    for (let i = start; i < end; i++) {
      const v = src[i]!;
      const c = v > 255 ? 255 : v;
      out[3 * i] = c;
      out[3 * i + 1] = c;
      out[3 * i + 2] = c;
    }
    if (end < n) await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return { data: out, width, height };
}
