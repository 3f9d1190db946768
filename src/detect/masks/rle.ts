// COCO run-length encoding of a mask streamed column by column (columns.ts): pycocotools' layout, so
// `pycocotools.mask.decode` and supervision read it. Counts run over the pixels in column-major (Fortran)
// order and alternate, starting with a run of 0s (0 when the first pixel is set); the compressed `counts`
// string is maskApi.c's rleToString: each count (from the fourth on, as the difference to the count two
// before) in 5-bit groups, low first, a continuation bit 0x20, plus 48.
import type { ColumnSink } from './columns.ts';

/** A mask as the response carries it by default: `{"size": [h, w], "counts": "..."}`. */
export interface RleMask {
  size: [number, number];
  counts: string;
}

/** Collects the uncompressed counts of a mask of `height` rows. */
export class RleEncoder implements ColumnSink {
  private counts = new Uint32Array(64);
  private n = 0;
  /** Pixel index (column-major) where the last run of 1s ended. */
  private last = 0;
  constructor(readonly width: number, readonly height: number) {}

  /** Empties the encoder for the next mask of the same size, keeping its buffer. */
  reset(): void {
    this.n = 0;
    this.last = 0;
  }

  private push(v: number): void {
    if (this.n === this.counts.length) {
      const grown = new Uint32Array(this.counts.length * 2);
      grown.set(this.counts);
      this.counts = grown;
    }
    this.counts[this.n++] = v;
  }

  column(x: number, runs: Int32Array, n: number): void {
    const base = x * this.height;
    for (let k = 0; k < n; k++) {
      const s = base + runs[2 * k]!;
      const e = base + runs[2 * k + 1]!;
      // A run touching the previous one (the end of the last column and the top of this one) continues it.
      if (this.n > 0 && s === this.last) this.counts[this.n - 1]! += e - s;
      else {
        this.push(s - this.last);
        this.push(e - s);
      }
      this.last = e;
    }
  }

  /** The counts, ending with the trailing run of 0s when the last pixel is unset. */
  finish(): Uint32Array {
    const total = this.width * this.height;
    if (this.n === 0 || total > this.last) this.push(total - this.last);
    return this.counts.subarray(0, this.n);
  }
}

// The characters of one string, reused up to SCRATCH_KEEP bytes: a buffer per mask was most of the garbage of
// a 100-mask response (bench/masks/RESULTS.md).
const SCRATCH_KEEP = 1 << 20;
let scratch = Buffer.allocUnsafe(1 << 16);

/** pycocotools' rleToString of uncompressed counts. */
export function rleToString(counts: ArrayLike<number>): string {
  const m = counts.length;
  // At most 7 groups of 5 bits per value (|x| < 2^32 and a sign bit).
  if (scratch.length < m * 7) {
    const grown = Buffer.allocUnsafe(m * 7);
    if (grown.length > SCRATCH_KEEP) return encodeInto(counts, grown);
    scratch = grown;
  }
  return encodeInto(counts, scratch);
}

function encodeInto(counts: ArrayLike<number>, out: Buffer): string {
  const m = counts.length;
  let p = 0;
  for (let i = 0; i < m; i++) {
    // Differences fit an int32: counts are at most width·height ≤ 8192² (src/image/limits.ts) < 2^31.
    let x = i > 2 ? counts[i]! - counts[i - 2]! : counts[i]!;
    let more = true;
    while (more) {
      let c = x & 0x1f;
      x >>= 5;
      more = c & 0x10 ? x !== -1 : x !== 0;
      if (more) c |= 0x20;
      out[p++] = c + 48;
    }
  }
  return out.toString('latin1', 0, p);
}

/** pycocotools' rleFrString: a compressed `counts` string → uncompressed counts. */
export function rleFromString(s: string): number[] {
  const counts: number[] = [];
  let p = 0;
  while (p < s.length) {
    let x = 0;
    let k = 0;
    let more = true;
    while (more) {
      const c = s.charCodeAt(p) - 48;
      if (!(c >= 0 && c < 64) || k > 6) throw new RangeError(`COCO RLE: ${JSON.stringify(s[p] ?? '')} at ${p} of the counts string is not a counts character (expected '0'…'o', at most 7 per count)`);
      x += (c & 0x1f) * 2 ** (5 * k);
      more = (c & 0x20) !== 0;
      p++;
      k++;
      if (more && p === s.length) throw new RangeError('COCO RLE: the counts string ends inside a count');
      if (!more && c & 0x10) x -= 2 ** (5 * k);
    }
    if (counts.length > 2) x += counts[counts.length - 2]!;
    counts.push(x);
  }
  return counts;
}

/** Streams a COCO RLE mask into `sinks` column by column, as columns.ts does the upsampled logits. */
export function streamRle(rle: RleMask, ...sinks: ColumnSink[]): void {
  const [h, w] = rle.size;
  const counts = rleFromString(rle.counts);
  const runs = new Int32Array(h + 2);
  let x = 0;
  let n = 0;
  const upTo = (col: number) => {
    for (; x < col; x++, n = 0) for (const s of sinks) s.column(x, runs, n);
  };
  let p = 0;
  for (let i = 0; i < counts.length; i++) {
    const c = counts[i]!;
    if (c < 0 || p + c > h * w) throw new RangeError(`COCO RLE: the counts overrun a ${h}×${w} mask (count ${i} is ${c} at pixel ${p})`);
    for (let s = p, e = p + c; i % 2 === 1 && s < e;) {
      const col = Math.floor(s / h);
      upTo(col);
      const y0 = s - col * h;
      const y1 = Math.min(h, e - col * h);
      if (n > 0 && runs[2 * n - 1] === y0) runs[2 * n - 1] = y1;
      else {
        runs[2 * n] = y0;
        runs[2 * n + 1] = y1;
        n++;
      }
      s = col * h + y1;
    }
    p += c;
  }
  if (p !== h * w) throw new RangeError(`COCO RLE: the counts cover ${p} pixels, a ${h}×${w} mask has ${h * w}`);
  upTo(w);
}
