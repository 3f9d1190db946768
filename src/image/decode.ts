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
// * By default the full-resolution decode: sharp never resizes, so no shrink-on-load (`fastShrinkOnLoad`, JPEG DCT
//   scaling) can change the pixels; the only resize is the sidecar's. `fastDecode` is the opt-in exception below.
//
// Limits: sides up to MAX_IMAGE_SIDE and input up to MAX_IMAGE_BYTES. The header is read first (header.ts for
// plain PNG/JPEG, else sharp `metadata()`; no pixel allocation), so a decompression bomb (a tiny file declaring 20000x20000) is refused
// before anything is decoded; `limitInputPixels` is set from the same limit as a second line of defence.
// Everything runs in sharp's (libuv) thread pool: the event loop is never blocked for the decode. Images of 8 MiB
// of pixels and more, while another such image is alive, are decoded from a worker thread into a reused buffer
// (pixel-pool.ts: the same pixels, without a new 36 MB buffer for the event loop's GC per 12 MP photo);
// RFDETR_DECODE_THREAD=off decodes them here like the rest, =on always through the thread. A large JPEG
// is decoded straight into the sidecar's shared memory instead when the caller offers a slot (`frameTarget`,
// frame-decode.ts): the same pixels, no buffer here and no copy after the decode.
import sharp, { type Metadata, type SharpOptions } from 'sharp';
import { RfdetrError } from '../errors.ts';

import { readImageHeader, sidecarForm } from './header.ts';
import { rgbPipeline } from './rgb-pipeline.ts';
import { decodeToFrame, V_HEADER_BYTES, type FrameTarget } from './frame-decode.ts';
import { PIXEL_THREAD_MIN_BYTES, PixelPool, PixelThreadError } from './pixel-pool.ts';
import { MAX_IMAGE_BYTES, MAX_IMAGE_SIDE } from './limits.ts';

export { MAX_IMAGE_BYTES, MAX_IMAGE_SIDE };

/** 8-bit RGB, interleaved, row-major: data.length === width * height * 3. */
export interface RgbImage {
  data: Uint8Array;
  width: number;
  height: number;
  /** Set when the pixels are a scaled-down decode (`fastDecode`): the stored image's size, which boxes refer to. */
  source?: { width: number; height: number };
  /**
   * Set when the pixels are in a reused buffer (a large decode, pixel-pool.ts): gives it back for the next
   * image. The owner calls it once nothing reads `data` any more; never calling it only forgoes the reuse.
   */
  release?: () => void;
  /** Set when the pixels were decoded straight into a sidecar's slot file (frame-decode.ts); `data` reads them back. */
  frame?: FrameTarget;
}

/**
 * An image file for the sidecar to decode (sidecar/PROTOCOL.md, "Images the sidecar decodes"): send it only in a
 * format the backend's decodes() says yes to. `width` and `height` are the caller's reading of its header.
 */
export interface EncodedImage {
  format: 'jpeg' | 'png';
  width: number;
  height: number;
  /** The whole file, sent as it is (not copied into the frame). */
  bytes: Uint8Array;
}

/** The decode threads and their buffers, for images of PIXEL_THREAD_MIN_BYTES and more. */
const pixelPool = new PixelPool();
/**
 * Large images decoding, or decoded and not yet released. The thread is taken only while another one is alive:
 * the main heap's GC churn is a crowd's problem (8 clients × 12 MP: event-loop p99 15–17 → 7–9 ms), while a
 * lone request would pay the thread's hop and copy (8–15 ms of decode) for nothing (bench/server/RESULTS.md §7).
 */
let largeAlive = 0; // an owner that never calls release() leaves it up: its later large images take the thread (same pixels)

/** RFDETR_DECODE_THREAD: `off` never, `on` for every large image, else (`auto`) while another large image is alive. */
function threadMode(): 'off' | 'on' | 'auto' {
  const v = (process.env.RFDETR_DECODE_THREAD ?? '').toLowerCase();
  return v === 'off' || v === 'on' ? v : 'auto';
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
 * The file as the sidecar decodes it, or undefined (decodeImage decodes it here): a form the sidecar's decoder
 * takes (header.ts sidecarForm), sides within MAX_IMAGE_SIDE, and pixels under PIXEL_THREAD_MIN_BYTES (larger
 * images keep their decode path here: the pixel thread, or straight into the sidecar's shared memory). Throws
 * what checkImageBytes throws, as decodeImage would.
 */
export function encodedForSidecar(bytes: Buffer | Uint8Array): EncodedImage | undefined {
  checkImageBytes(bytes);
  const h = sidecarForm(bytes);
  if (!h || h.width > MAX_IMAGE_SIDE || h.height > MAX_IMAGE_SIDE || h.width * h.height * 3 >= PIXEL_THREAD_MIN_BYTES) return undefined;
  return { format: h.format, width: h.width, height: h.height, bytes };
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
  /**
   * Opt-in, changes pixels: a JPEG at least 3× `size` on both sides is decoded at 1/2, 1/4 or 1/8 scale by
   * libjpeg's DCT scaling (sharp's shrink-on-load) and resized to size×size by sharp's linear kernel, so the
   * sidecar's resize is the identity. A 4000×3000 JPEG: a 1000×750 decode (2.5–3.4× less CPU),
   * 0.9 MB instead of 36 MB to the sidecar; its effect on pixel_values and detections is measured by
   * bench/server/fast-decode.ts (SERVING.md, `fast_decode`). Other formats and smaller JPEGs decode exactly.
   */
  fastDecode?: { size: number };
  /**
   * false: a large image is decoded on this thread's heap too, never through pixel-pool.ts (a benchmark's
   * baseline: sharp's own decode, with no thread hop, copy or pool buffer).
   */
  thread?: boolean;
  /**
   * A slot file a large JPEG may be decoded straight into (frame-decode.ts), asked with the file's size in
   * bytes; undefined: none free. The image then carries `frame`, and release() must be called.
   */
  frameTarget?: (bytes: number) => FrameTarget | undefined;
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
  const quick = readImageHeader(bytes);
  const { format, width, height, grey16 } = quick ? { ...quick, grey16: false } : await sharpHeader(bytes, options);
  if (!ACCEPTED_FORMATS.has(format)) throw undecodable(`the format '${format}' is not accepted`);
  if (!(width > 0 && height > 0)) throw undecodable(`the header declares a ${width}x${height} image`);
  if (width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE) {
    throw new RfdetrError('E_IMAGE_TOO_LARGE', `image is too large: ${width}x${height} pixels; each side must be at most ${MAX_IMAGE_SIDE} pixels`, { width, height, limit: MAX_IMAGE_SIDE });
  }
  // sharp takes a DCT scale of 1/s only when the shrink is at least s and its integer part is not s (it
  // halves s then, for libjpeg's rounding): below 3× the input side no DCT scaling happens and the scaled path
  // would cost as much as the exact one while changing pixels (measured: bench/server/fast-decode.json).
  const fast = opts.fastDecode && format === 'jpeg' && Math.min(width, height) >= 3 * opts.fastDecode.size ? opts.fastDecode.size : 0;
  // The size is the decoded one (what a drawing of it would cover).
  if (opts.reserve) await opts.reserve(fast ? fast * fast * 3 : width * height * (grey16 ? 5 : 3), fast ? { width: fast, height: fast } : { width, height });
  // A large image's place in largeAlive: given up by release() once decoded, or by the catch below on any failure.
  let lease: (() => void) | undefined;
  try {
    if (fast) return await decodeScaled(bytes, options, width, height, fast);
    if (grey16) return await decodeGrey16(bytes, options, width, height);
    const n = width * height * 3;
    if (n >= PIXEL_THREAD_MIN_BYTES) {
      const mode = opts.thread === false ? 'off' : threadMode();
      const viaThread = mode === 'on' || (mode === 'auto' && largeAlive > 0);
      largeAlive++;
      let leased = true;
      lease = () => {
        if (leased) (leased = false), largeAlive--;
      };
      const target = format === 'jpeg' && opts.thread !== false ? opts.frameTarget?.(V_HEADER_BYTES + n) : undefined;
      const framed = target && (await decodeToFrame(bytes, options, width, height, target, lease));
      if (framed) return framed;
      // A dead thread: decoded below on this thread's path instead.
      const px = viaThread ? await pixelPool.decode(bytes, options, n).catch((e: unknown) => {
        if (e instanceof PixelThreadError) return undefined;
        throw e;
      }) : undefined;
      if (px) {
        if (px.channels !== 3 || px.width !== width || px.height !== height || px.data.length !== n) {
          px.release();
          throw new Error(`sharp returned ${px.width}x${px.height}x${px.channels} for a ${width}x${height} ${format}`);
        }
        const done = lease;
        return { data: px.data, width, height, release: () => (px.release(), done()) };
      }
    }
    // 8-bit and the 16-bit RGB/RGBA/LA cases (rgb-pipeline.ts).
    const { data, info } = await rgbPipeline(bytes, options).raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
    if (info.channels !== 3 || info.width !== width || info.height !== height || data.length !== width * height * 3) {
      throw new Error(`sharp returned ${info.width}x${info.height}x${info.channels} for a ${width}x${height} ${format}`);
    }
    return { data: new Uint8Array(data.buffer, data.byteOffset, data.length), width, height, ...(lease ? { release: lease } : {}) };
  } catch (e) {
    lease?.();
    if (e instanceof RfdetrError) throw e;
    throw undecodable(`the ${format} data is corrupt or truncated (${(e as Error).message.trim()})`, e);
  }
}

/** `fastDecode`: DCT-scaled JPEG decode, then sharp's linear resize to size×size. */
async function decodeScaled(bytes: Buffer | Uint8Array, options: SharpOptions, width: number, height: number, size: number): Promise<RgbImage> {
  const { data, info } = await sharp(bytes, options)
    .resize(size, size, { fit: 'fill', kernel: 'linear', fastShrinkOnLoad: true })
    .removeAlpha().toColourspace('srgb').raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  if (info.channels !== 3 || info.width !== size || info.height !== size) {
    throw new Error(`sharp returned ${info.width}x${info.height}x${info.channels} for a ${size}x${size} scaled decode`);
  }
  return { data: new Uint8Array(data.buffer, data.byteOffset, data.length), width: size, height: size, source: { width, height } };
}

/** The header through sharp (formats and cases readImageHeader leaves to it): no pixels are decoded. */
async function sharpHeader(bytes: Buffer | Uint8Array, options: SharpOptions): Promise<{ format: string; width: number; height: number; grey16: boolean }> {
  let meta: Metadata;
  try {
    // Without the pixel limit, so that an oversized image is reported with its size as E_IMAGE_TOO_LARGE rather
    // than as sharp's generic "exceeds pixel limit".
    meta = await sharp(bytes, { ...options, limitInputPixels: false }).metadata();
  } catch (e) {
    throw undecodable(`${bytes.length} bytes that are not a readable image (${(e as Error).message.trim()})`, e);
  }
  // 16-bit grey passes through a 2-byte-per-pixel buffer before the RGB one.
  return { format: meta.format, width: meta.width, height: meta.height, grey16: meta.depth === 'ushort' && meta.channels === 1 };
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
