// A large decode written straight into a file the sidecar maps (a shared-memory slot, src/sidecar/shm-slots.ts)
// instead of into a buffer the server then copies there. sharp streams its output only to a file: libvips' V
// format (a 64-byte header, then the pixels as they are, then XML metadata) is written by libvips' write-behind
// thread strip by strip while the JPEG is still decoding, so the copy into tmpfs overlaps the decode on the
// other core. A 4000×3000 frame's copy into the slot after the decode cost 7–8 ms on the request's path here
// (a 36 MB pwrite into tmpfs, one or two pool threads alike: memory-bound); written during the decode it costs
// the request nothing (bench/server/RESULTS.md §9). sharp's raw stream output is no way round: it buffers the
// whole image and pushes it once.
//
// The pixels are the same sharp pipeline as decode.ts's (rgb-pipeline.ts); the V header is
// checked (w×h, 3 bands of uchar, uncoded) before the frame is used, and anything unexpected (a failed write,
// a full tmpfs, another band format, even a corrupt image) returns undefined: the caller decodes on its usual
// path, which reports the image's own errors in its usual words.
import type { SharpOptions } from 'sharp';
import { rgbPipeline } from './rgb-pipeline.ts';

/** Where a decode may write its V file: one slot file, held for this image until release(). */
export interface FrameTarget {
  /** A path ending in `.v` (libvips picks the format from the name) that opens the slot file. */
  readonly path: string;
  /**
   * After libvips wrote the file: true when it holds a width×height 8-bit RGB image in V layout, whose pixels
   * then start at `V_HEADER_BYTES`.
   */
  check(width: number, height: number): boolean;
  /** The pixels, read back from the file (for a frame that must travel another way, or be drawn on). */
  read(): Uint8Array;
  /** The image no longer needs the slot (the sidecar may still be reading it: that hold is separate). */
  release(): void;
}

/** libvips' V header: the pixels follow it. */
export const V_HEADER_BYTES = 64;

/**
 * A decoded image whose pixels are in `frame`: `data` reads them back on its first use (a frame that cannot go
 * by reference, a drawing); `release()` gives the slot back and then `lease()` (decode.ts's count of large images).
 */
export interface FramedImage {
  readonly data: Uint8Array;
  width: number;
  height: number;
  frame: FrameTarget;
  release: () => void;
}

/** Decodes `bytes` into `target`; undefined (and the target released) when the frame cannot be used. */
export async function decodeToFrame(bytes: Uint8Array, options: SharpOptions, width: number, height: number, target: FrameTarget, lease: () => void): Promise<FramedImage | undefined> {
  try {
    const info = await rgbPipeline(bytes, options).toFile(target.path);
    if (info.format === 'v' && info.width === width && info.height === height && info.channels === 3 && target.check(width, height)) {
      let data: Uint8Array | undefined;
      let released = false;
      return {
        get data() {
          if (released) throw new Error('the pixels of a released frame were read');
          return (data ??= target.read());
        },
        width, height, frame: target,
        release: () => {
          if (released) return;
          released = true;
          target.release();
          lease();
        },
      };
    }
  } catch {
    // A write that failed (ENOSPC), or the image's own error: the usual path decodes it again and says which.
  }
  target.release();
  return undefined;
}
