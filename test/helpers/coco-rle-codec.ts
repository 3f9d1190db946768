// An independent COCO RLE reader for the tests (written from pycocotools' maskApi.c, not from the product's
// encoder): the compressed counts string → counts (rleFrString), counts → a column-major bitmap (rleDecode),
// counts → the compressed string (rleToString) for fixtures that store uncompressed counts, and a mask
// comparison that ignores a given pixel set (the fixtures' near-zero pixels).

/** maskApi.c rleFrString: the compressed `counts` string → uncompressed counts. */
export function countsFromString(s: string): number[] {
  const cnts: number[] = [];
  let p = 0;
  while (p < s.length) {
    let x = 0;
    let k = 0;
    let more = true;
    while (more) {
      const c = s.charCodeAt(p) - 48;
      if (c < 0 || c > 63) throw new Error(`not a COCO RLE string: character ${JSON.stringify(s[p])} at ${p}`);
      x += (c & 0x1f) * 2 ** (5 * k);
      more = (c & 0x20) !== 0;
      p++;
      k++;
      if (!more && c & 0x10) x -= 2 ** (5 * k);
    }
    if (cnts.length > 2) x += cnts[cnts.length - 2]!;
    cnts.push(x);
  }
  return cnts;
}

/** maskApi.c rleToString, with arithmetic on plain numbers (no 32-bit shifts). */
export function countsToString(cnts: readonly number[]): string {
  let s = '';
  for (let i = 0; i < cnts.length; i++) {
    let x = cnts[i]! - (i > 2 ? cnts[i - 2]! : 0);
    let more = true;
    while (more) {
      let c = ((x % 32) + 32) % 32;
      x = Math.floor(x / 32);
      more = c & 0x10 ? x !== -1 : x !== 0;
      if (more) c |= 0x20;
      s += String.fromCharCode(c + 48);
    }
  }
  return s;
}

/** maskApi.c rleDecode: counts → h·w bytes in column-major order (pixel (x, y) at x·h + y), checking the total. */
export function decodeCounts(cnts: readonly number[], h: number, w: number): Uint8Array {
  const out = new Uint8Array(h * w);
  let p = 0;
  let v = 0;
  for (const c of cnts) {
    if (c < 0 || p + c > h * w) throw new Error(`RLE counts overrun a ${h}×${w} mask at ${p} + ${c}`);
    if (v) out.fill(1, p, p + c);
    p += c;
    v ^= 1;
  }
  if (p !== h * w) throw new Error(`RLE counts cover ${p} pixels, a ${h}×${w} mask has ${h * w}`);
  return out;
}

/** A decoded mask: `bits[x * height + y]` (column-major, as COCO stores it) is 1 inside the mask. */
export interface Bitmap { width: number; height: number; bits: Uint8Array }

/** The bitmap of a COCO RLE `{size: [h, w], counts}` (counts uncompressed or as the compressed string). */
export function decodeRle(rle: { size: [number, number] | number[]; counts: string | number[] }): Bitmap {
  const [height, width] = rle.size as [number, number];
  const counts = typeof rle.counts === 'string' ? countsFromString(rle.counts) : rle.counts;
  return { width, height, bits: decodeCounts(counts, height, width) };
}

/** IoU of a and b, and the pixels where they differ outside and inside `ignore`. */
export function compareMasks(a: Bitmap, b: Bitmap, ignore?: Bitmap): { iou: number; differOutside: number; differInside: number } {
  if (a.width !== b.width || a.height !== b.height) throw new RangeError(`compareMasks: ${a.height}x${a.width} vs ${b.height}x${b.width}`);
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
