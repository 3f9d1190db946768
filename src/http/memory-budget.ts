// One memory budget (--memory-limit) for everything a /predict request holds, at every stage:
//   undecoded bytes  a body as it arrives, an image_url's bytes as they arrive, until the image is decoded:
//                    taken without waiting (the client is sending now) and refused with 503 past their part
//                    of the budget (half of it; a quarter per client), so stalled uploads cannot fill it;
//   work             the decoded pixels and, with return_image, the drawing and its encodings, and a segment
//                    model's mask rows (selectedRowsCost): reserved from the image header before a pixel is
//                    decoded, waiting fairly (limiter.ts) for room, held until the response is written. One image's work may take at most half the budget; more is
//                    refused (4xx), never attempted.
// Undecoded bytes never exceed half and one image's work never exceeds half, so an image that waits for room
// always gets it once the others ahead of it finish: the two kinds cannot lock each other out.
import { RfdetrError } from '../errors.ts';
import type { OutputSpec } from '../sidecar/backend.ts';
import { Limiter } from './limiter.ts';

/** The default --memory-limit: leaves a 4 GB container room for node itself (~0.3 GB), the sidecar (~0.6 GB) and slack. */
export const DEFAULT_MEMORY_LIMIT = 1024 * 1024 * 1024;
/** The smallest --memory-limit: one 8192x8192 image's pixels (201 MB) must fit in half of it. */
export const MIN_MEMORY_LIMIT = 512 * 1024 * 1024;

/**
 * What a JSON body costs per byte received: the raw chunks, the string body-parser makes of them and the
 * string JSON.parse makes of the base64 field are alive at once (the decoded image, 0.75 byte per byte, comes
 * after the chunks are gone).
 */
export const JSON_BYTE_COST = 3;

/**
 * Bytes one annotated image costs beyond its pixels (return_image): the SVG overlay rasterised as RGBA (4 B
 * per pixel), the encoded PNG or JPEG (noise does not compress: up to 3 B per pixel), its base64 string, the
 * JSON response string and the buffer written to the socket (4/3 of the encoding each). Measured: an
 * 8192x8192 noise image with return_image "png" raised RSS by 1.17 GB (this formula: 1.28 GB).
 */
export function annotateCost(width: number, height: number): number {
  const px = width * height;
  return px * 4 + px * 3 + 3 * Math.ceil((px * 3 * 4) / 3);
}

/**
 * Bytes one image's selected output rows hold (a segment model's mask logits, PROTOCOL.md "Selected rows"): the
 * reply frame's bytes and the f32 copy the client decodes them into are alive together while the reply is read,
 * and the copy until the response is written. Counted for every query's row, the bound the hello declares: the
 * sidecar sends max_detections rows plus their near-ties, and near-ties (saturated scores) have no smaller
 * bound. Seg-large at 504 px: 2 × 200 × 126² × 4 B = 25 MB; 0 without a selected output or without masks.
 */
export function selectedRowsCost(outputs: readonly OutputSpec[] | undefined, masks: boolean): number {
  if (!masks || !outputs) return 0;
  return outputs.filter((o) => o.rows === 'selected').reduce((n, o) => n + 2 * 4 * o.shape.reduce((p, d) => p * d, 1), 0);
}

export function mib(n: number): string {
  return `${Math.round(n / (1024 * 1024))} MiB`;
}

export class MemoryBudget {
  readonly work: Limiter;
  /** Undecoded bytes may take this much of the budget in all … */
  readonly undecodedLimit: number;
  /** … and one client this much. */
  readonly undecodedClientLimit: number;
  /** One image's work may reserve at most this much. */
  readonly maxWorkPerImage: number;
  #undecoded = 0;
  readonly #undecodedBy = new Map<string, number>();

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < MIN_MEMORY_LIMIT) {
      throw new RangeError(`Expected an integer >= ${MIN_MEMORY_LIMIT} (${mib(MIN_MEMORY_LIMIT)}) for the memory limit but received ${String(limit)}`);
    }
    this.undecodedLimit = Math.floor(limit / 2);
    this.undecodedClientLimit = Math.floor(limit / 4);
    this.maxWorkPerImage = Math.floor(limit / 2);
    this.work = new Limiter(limit, { clientLimit: this.maxWorkPerImage, heldElsewhere: () => this.#undecoded });
  }

  /** Bytes held now (undecoded + work). */
  get held(): number {
    return this.#undecoded + this.work.running;
  }

  get undecoded(): number {
    return this.#undecoded;
  }

  /** A holder for one request's undecoded bytes (its body, its image_url download). */
  undecodedFor(client: string): UndecodedBytes {
    return new UndecodedBytes(this, client);
  }

  /** @internal Moves `n` bytes into (or out of, negative) the undecoded part; throws 503 when it does not fit. */
  moveUndecoded(client: string, n: number): void {
    const mine = (this.#undecodedBy.get(client) ?? 0) + n;
    if (n > 0 && (this.#undecoded + n > this.undecodedLimit || mine > this.undecodedClientLimit || this.held + n > this.limit)) {
      const whose = mine > this.undecodedClientLimit ? `one client's share (${mib(this.undecodedClientLimit)})` : `the ${mib(this.undecodedLimit)} of --memory-limit they may take`;
      throw new RfdetrError('E_QUEUE_FULL', `request bodies and downloads not yet decoded fill ${whose}: retry after the Retry-After delay`, { memory_limit: this.limit });
    }
    this.#undecoded += n;
    if (mine === 0) this.#undecodedBy.delete(client);
    else this.#undecodedBy.set(client, mine);
    if (n < 0) this.work.pump();
  }

  /** The 4xx for an image whose work cannot fit in this budget at all. */
  tooLargeFor(width: number, height: number, bytes: number, returnImage: boolean, alreadyHeld = 0): RfdetrError {
    const what = (returnImage ? `return_image on a ${width}x${height} image needs about ${mib(bytes)} to decode, draw and encode` : `a ${width}x${height} image needs ${mib(bytes)} to decode`)
      + (alreadyHeld > 0 ? ` beside the ${mib(alreadyHeld)} this request's earlier annotated images hold` : '');
    const fix = returnImage ? 'ask without return_image, send a smaller image, or raise --memory-limit' : 'send a smaller image or raise --memory-limit';
    return new RfdetrError('E_IMAGE_TOO_LARGE', `${what}; this server allows ${mib(this.maxWorkPerImage)} per image (half of --memory-limit ${mib(this.limit)}): ${fix}`,
      { width, height, needed_bytes: bytes, max_bytes: this.maxWorkPerImage });
  }
}

/** One request's undecoded bytes; released once its images are decoded (or the request ends). */
export class UndecodedBytes {
  #held = 0;
  constructor(private readonly budget: MemoryBudget, private readonly client: string) {}

  get held(): number {
    return this.#held;
  }

  /** Counts `n` more bytes; throws 503 E_QUEUE_FULL (and counts nothing) when they do not fit. */
  add(n: number): void {
    this.budget.moveUndecoded(this.client, n);
    this.#held += n;
  }

  release(): void {
    if (this.#held === 0) return;
    const n = this.#held;
    this.#held = 0;
    this.budget.moveUndecoded(this.client, -n);
  }
}
