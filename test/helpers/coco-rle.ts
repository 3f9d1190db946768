// COCO run-length masks read back for tests, written from the COCO format's description (column-major runs that
// start with a run of 0s; the compressed `counts` string of pycocotools' rleFrString: 5-bit groups + 48, a
// continuation bit 0x20, a sign bit 0x10 on the last group, each count from the fourth on stored as a
// difference from the count two before). Independent of the product's encoder (src/detect/masks/), so a served
// mask is checked by code that did not make it.

/** A decoded mask: `bits[x * height + y]` (column-major, as COCO stores it) is 1 inside the mask. */
export interface Bitmap { width: number; height: number; bits: Uint8Array }

/** The run lengths of a compressed COCO `counts` string. */
export function countsFromString(s: string): number[] {
  const counts: number[] = [];
  let p = 0;
  while (p < s.length) {
    let x = 0;
    let k = 0;
    let more = true;
    while (more) {
      const c = s.charCodeAt(p) - 48;
      if (c < 0 || c > 63) throw new RangeError(`coco-rle: character ${JSON.stringify(s[p])} at ${p} is outside '0'..'o'`);
      x += (c & 0x1f) * 2 ** (5 * k);
      more = (c & 0x20) !== 0;
      p++;
      k++;
      if (!more && (c & 0x10) !== 0) x -= 2 ** (5 * k); // the last group's sign bit: two's complement
      if (more && p >= s.length) throw new RangeError('coco-rle: the counts string ends inside a number');
    }
    if (counts.length > 2) x += counts[counts.length - 2]!;
    counts.push(x);
  }
  return counts;
}

/** The bitmap of COCO runs (`counts` as numbers or as the compressed string) of a `[height, width]` mask. */
export function decodeRle(rle: { size: [number, number] | number[]; counts: string | number[] }): Bitmap {
  const [height, width] = rle.size as [number, number];
  const counts = typeof rle.counts === 'string' ? countsFromString(rle.counts) : rle.counts;
  const bits = new Uint8Array(width * height);
  let at = 0;
  counts.forEach((n, i) => {
    if (n < 0 || at + n > bits.length) throw new RangeError(`coco-rle: run ${i} of ${n} overruns the ${height}x${width} mask at ${at}`);
    if (i % 2 === 1) bits.fill(1, at, at + n);
    at += n;
  });
  if (at !== bits.length) throw new RangeError(`coco-rle: the runs cover ${at} pixels of the ${height}x${width} mask's ${bits.length}`);
  return { width, height, bits };
}

/** Pixels set in both, in either, and set in a but not b or b but not a outside `ignore`. */
export function compareMasks(a: Bitmap, b: Bitmap, ignore?: Bitmap): { iou: number; differOutside: number; differInside: number } {
  if (a.width !== b.width || a.height !== b.height) throw new RangeError(`coco-rle: ${a.height}x${a.width} vs ${b.height}x${b.width}`);
  let inter = 0, union = 0, differOutside = 0, differInside = 0;
  for (let i = 0; i < a.bits.length; i++) {
    const x = a.bits[i]!, y = b.bits[i]!;
    inter += x & y;
    union += x | y;
    if (x !== y) {
      if (ignore?.bits[i]) differInside++;
      else differOutside++;
    }
  }
  return { iou: union === 0 ? 1 : inter / union, differOutside, differInside };
}
