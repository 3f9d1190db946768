// How a frame's pixels reach the sidecar, decided in ONE place for every backend (a supervisor, a pool, a test
// double): prepareFrame() over what the backend can take (TransportCaps). A file is sent as it is for the
// sidecar to decode when it is a plain JPEG/PNG under the size rule (decode.ts encodedForSidecar), the sidecar
// decodes that form and nothing here needs the pixels; else sharp decodes it here, off the event loop, a large
// JPEG straight into a shared-memory slot of the sidecar that will serve it (frame-decode.ts). Decoded pixels
// go to shared memory or the socket (the connection's choice, client.ts); a tensor goes as it is. A file the
// sidecar declines (E_SIDECAR_DECLINED) is decoded here and sent again: the transport's own retry.
//
// The caller's budget goes in as arguments (TransportBudget): the decode slot, the memory reservation made from
// the header before any pixel is decoded, the abort signal, whether it needs the pixels (a drawing), the scaled
// decode, and the decode function itself.
import { RfdetrError, isRfdetrError } from '../errors.ts';
import { decodeImage, encodedForSidecar, type DecodeOptions, type EncodedImage, type RgbImage } from '../image/decode.ts';
import type { FrameTarget } from '../image/frame-decode.ts';
import type { InferInput } from './backend.ts';

/** What a frame holds: an image file to decode, decoded RGB pixels, or pixel_values f32 [3,S,S] CHW. */
export type FrameData = { file: Uint8Array } | { pixels: RgbImage } | { tensor: Float32Array };

/** Who decoded a file: here, in the sidecar, or here after the sidecar declined it (null: the frame was no file). */
export type DecodedBy = 'server' | 'sidecar' | 'server_after_decline' | null;

export interface TransportBudget {
  /** Stops a decode's wait and the retry after a decline. */
  signal?: AbortSignal | undefined;
  /**
   * A decode slot: taken before a file's header is read, given back (the function it resolves to) once the file
   * is decoded here or sent as it is. Not taken for the retry after a decline: waiting for a slot while holding
   * pixel memory could deadlock with slot holders waiting for memory.
   */
  slot?: (() => Promise<() => void>) | undefined;
  /**
   * Called with the bytes the frame's pixels take (here or in the sidecar) and their size, before any pixel is
   * decoded; the frame waits for it and fails with it (a memory budget).
   */
  reserve?: ((bytes: number, size: { width: number; height: number }) => Promise<void>) | undefined;
  /** The pixels are needed here (a drawing): decoded here, exactly, and not into shared memory. */
  needPixels?: boolean | undefined;
  /** sharp's scaled JPEG decode to this input side (decode.ts `fastDecode`); ignored when needPixels. */
  fastDecode?: { size: number } | undefined;
  /** The decode here (default decode.ts decodeImage). */
  decode?: ((bytes: Uint8Array, opts: DecodeOptions) => Promise<RgbImage>) | undefined;
  /** Wait for the sidecar to say which files it decodes before choosing (a one-shot run's first frame). */
  waitForDecoders?: boolean | undefined;
  /** Called once the file's bytes are no longer needed: decoded here, or answered by the sidecar that decoded it. */
  fileDone?: (() => void) | undefined;
}

/** What a backend offers the transport: the file forms its sidecar decodes, and slots to decode into. */
export interface TransportCaps {
  decodes(format: 'jpeg' | 'png'): boolean;
  frameTarget(bytes: number): FrameTarget | undefined;
  /** Resolves once decodes() has its answer; never rejects. */
  decodersKnown?(): Promise<void>;
}

/** A frame ready to send: its input, and the retry of a declined file. */
export interface Prepared {
  /** What the forward is sent (a declined file: its pixels once send() retried). */
  readonly input: InferInput;
  /** Who decoded the file (updated by send() after a decline). */
  readonly by: DecodedBy;
  /** The pixels here, when there are any (decoded here or given); undefined for a file the sidecar decodes. */
  readonly image: RgbImage | undefined;
  /**
   * Runs `forward` on the input. A file the sidecar declines is decoded here (into the pixels already reserved,
   * without waiting for anything), `onDecline(decodeMs, startedAt)` is told, and it is sent again.
   */
  send<R>(forward: (input: InferInput) => Promise<R>, onDecline?: (decodeMs: number, startedAt: number) => void): Promise<R>;
  /** Gives back what the pixels hold (a pool buffer, a shared-memory slot); once nothing reads them. */
  release(): void;
}

/** A non-RfdetrError out of a decode (sharp's own) as E_IMAGE_UNDECODABLE; the rest as they are. */
function decodeFailure(e: unknown, signal: AbortSignal | undefined): unknown {
  if (isRfdetrError(e) || (signal && e === signal.reason)) return e;
  return new RfdetrError('E_IMAGE_UNDECODABLE', `image could not be decoded: ${(e as Error)?.message ?? String(e)}: expected PNG, JPEG, WebP, GIF or TIFF bytes`, undefined, { cause: e });
}

class PreparedFrame implements Prepared {
  input: InferInput;
  by: DecodedBy;
  image: RgbImage | undefined;
  readonly #file: Uint8Array | undefined;
  readonly #budget: TransportBudget;

  constructor(input: InferInput, by: DecodedBy, image: RgbImage | undefined, file: Uint8Array | undefined, budget: TransportBudget) {
    this.input = input;
    this.by = by;
    this.image = image;
    this.#file = file;
    this.#budget = budget;
  }

  async send<R>(forward: (input: InferInput) => Promise<R>, onDecline?: (decodeMs: number, startedAt: number) => void): Promise<R> {
    if (this.by !== 'sidecar') return forward(this.input);
    const { signal } = this.#budget;
    try {
      const r = await forward(this.input);
      this.#budget.fileDone?.();
      return r;
    } catch (e) {
      if (!isRfdetrError(e) || e.code !== 'E_SIDECAR_DECLINED' || signal?.aborted) throw e;
    }
    // Declined (a form its decoder does not take after all, a libjpeg warning it will not pass, a corrupt file):
    // decoded here as any other file, into the pixels already reserved for it. Without a decode slot: waiting
    // for one while holding pixel memory could deadlock with slot holders waiting for memory.
    const t1 = performance.now();
    try {
      this.image = await (this.#budget.decode ?? decodeImage)(this.#file!, { reserve: async () => {} });
    } catch (err) {
      throw decodeFailure(err, signal);
    } finally {
      this.#budget.fileDone?.();
    }
    this.by = 'server_after_decline';
    this.input = { image: this.image };
    onDecline?.(performance.now() - t1, t1);
    if (signal?.aborted) throw signal.reason;
    return forward(this.input);
  }

  release(): void {
    if (this.by !== null) this.image?.release?.();
  }
}

/**
 * The transport's one decision for `frame` on a backend offering `caps` (undefined: it decodes nothing and lends
 * no slots). Throws a file's decode errors as E_IMAGE_UNDECODABLE / E_IMAGE_TOO_LARGE, and the budget's own.
 */
export async function prepareFrame(caps: TransportCaps | undefined, frame: FrameData, budget: TransportBudget = {}): Promise<Prepared> {
  if ('tensor' in frame) return new PreparedFrame({ pixelValues: frame.tensor }, null, undefined, undefined, budget);
  if ('pixels' in frame) {
    const img = frame.pixels;
    await budget.reserve?.(img.data.length, { width: img.width, height: img.height });
    return new PreparedFrame({ image: img }, null, img, undefined, budget);
  }
  const bytes = frame.file;
  const releaseSlot = await budget.slot?.();
  let sent = false;
  try {
    let encoded: EncodedImage | undefined;
    if (caps && !budget.needPixels && !budget.fastDecode) {
      if (budget.waitForDecoders) await caps.decodersKnown?.();
      encoded = encodedForSidecar(bytes);
      if (encoded && !caps.decodes(encoded.format)) encoded = undefined;
    }
    if (encoded) {
      // The same reservation as the decode's here: the pixels exist in the sidecar instead.
      await budget.reserve?.(encoded.width * encoded.height * 3, encoded);
      sent = true;
      return new PreparedFrame({ encoded }, 'sidecar', undefined, bytes, budget);
    }
    const image = await (budget.decode ?? decodeImage)(bytes, {
      ...(budget.fastDecode && !budget.needPixels ? { fastDecode: budget.fastDecode } : {}),
      // Straight into the sidecar's shared memory (frame-decode.ts); a drawing needs the pixels here.
      ...(caps && !budget.needPixels ? { frameTarget: (n: number) => caps.frameTarget(n) } : {}),
      ...(budget.reserve ? { reserve: budget.reserve } : {}),
    });
    return new PreparedFrame({ image }, 'server', image, undefined, budget);
  } catch (e) {
    throw decodeFailure(e, budget.signal);
  } finally {
    releaseSlot?.();
    // The file's bytes: no longer needed once decoded here (a file for the sidecar: once it answered).
    if (!sent) budget.fileDone?.();
  }
}
