// Paints a mask streamed column by column (columns.ts) into a raw RGB24 image: each foreground pixel blended
// with one colour, out = (colour·α + pixel·(255 − α) + 127) / 255, as the annotation's overlay blends.
import type { ColumnSink } from './columns.ts';

export class MaskPainter implements ColumnSink {
  private readonly stride: number;
  /**
   * @param rgb the image (width × height × 3 bytes, row-major), painted in place
   * @param alpha 0..255
   */
  constructor(private readonly rgb: Uint8Array, readonly width: number, private readonly colour: readonly [number, number, number], private readonly alpha: number) {
    this.stride = width * 3;
  }

  column(x: number, runs: Int32Array, n: number): void {
    const [r, g, b] = this.colour;
    const a = this.alpha;
    const k = 255 - a;
    const ra = r * a + 127, ga = g * a + 127, ba = b * a + 127;
    const px = this.rgb;
    for (let t = 0; t < n; t++) {
      const end = runs[2 * t + 1]! * this.stride + x * 3;
      for (let o = runs[2 * t]! * this.stride + x * 3; o < end; o += this.stride) {
        px[o] = ((ra + px[o]! * k) / 255) | 0;
        px[o + 1] = ((ga + px[o + 1]! * k) / 255) | 0;
        px[o + 2] = ((ba + px[o + 2]! * k) / 255) | 0;
      }
    }
  }
}

/**
 * Paints the inside of COCO polygons (`mask_format=polygon`) like MaskPainter: the pixels whose centre is
 * inside, by the nonzero rule over all of them (so overlapping contours, e.g. an island in a hole, paint
 * once).
 */
export function paintPolygons(rgb: Uint8Array, width: number, height: number, polygons: readonly (readonly number[])[], colour: readonly [number, number, number], alpha: number): void {
  let top = Infinity, bottom = -Infinity;
  for (const p of polygons) for (let i = 1; i < p.length; i += 2) {
    top = Math.min(top, p[i]!);
    bottom = Math.max(bottom, p[i]!);
  }
  const [r, g, b] = colour;
  const k = 255 - alpha;
  const ra = r * alpha + 127, ga = g * alpha + 127, ba = b * alpha + 127;
  const xs: number[] = [];
  const dirs: number[] = [];
  for (let y = Math.max(0, Math.floor(top)); y < Math.min(height, Math.ceil(bottom)); y++) {
    const yc = y + 0.5;
    xs.length = 0;
    dirs.length = 0;
    for (const p of polygons) {
      const m = p.length >> 1;
      for (let i = 0; i < m; i++) {
        const x1 = p[2 * i]!, y1 = p[2 * i + 1]!;
        const j = i + 1 < m ? i + 1 : 0;
        const x2 = p[2 * j]!, y2 = p[2 * j + 1]!;
        if ((y1 <= yc) === (y2 <= yc)) continue;
        xs.push(x1 + ((yc - y1) * (x2 - x1)) / (y2 - y1));
        dirs.push(y2 > y1 ? 1 : -1);
      }
    }
    const order = xs.map((_, i) => i).sort((a, c) => xs[a]! - xs[c]!);
    let wind = 0;
    let start = 0;
    const row = y * width * 3;
    for (const i of order) {
      const before = wind;
      wind += dirs[i]!;
      if (before === 0) {
        start = xs[i]!;
        continue;
      }
      if (wind !== 0) continue;
      // Back outside: the pixels with centres in [start, xs[i]).
      for (let x = Math.max(0, Math.ceil(start - 0.5)); x < width && x + 0.5 < xs[i]!; x++) {
        const o = row + x * 3;
        rgb[o] = ((ra + rgb[o]! * k) / 255) | 0;
        rgb[o + 1] = ((ga + rgb[o + 1]! * k) / 255) | 0;
        rgb[o + 2] = ((ba + rgb[o + 2]! * k) / 255) | 0;
      }
    }
  }
}
