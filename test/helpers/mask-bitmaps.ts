// Plain per-pixel references for the mask tests: a column-major bitmap from a column sink, the column runs of a
// bitmap, polygon rasterization (pixel centres, even-odd per polygon, union over polygons), the shoelace area,
// 4-connected components and the background not reachable from outside (8-connected: the holes).
import type { ColumnSink } from '../../src/detect/masks/columns.ts';

/** A sink that writes the mask into a column-major bitmap (pixel (x, y) at x·h + y), checking the runs' form. */
export function bitmapSink(w: number, h: number): ColumnSink & { bits: Uint8Array; columns: number } {
  const bits = new Uint8Array(w * h);
  const sink = {
    bits,
    columns: 0,
    column(x: number, runs: Int32Array, n: number) {
      if (x !== sink.columns) throw new Error(`column ${x} delivered, expected ${sink.columns}`);
      sink.columns++;
      let prev = -1;
      for (let k = 0; k < n; k++) {
        const a = runs[2 * k]!, b = runs[2 * k + 1]!;
        if (!(a > prev && b > a && b <= h)) throw new Error(`column ${x}: run [${a}, ${b}) after ${prev} is not ascending, disjoint and apart`);
        bits.fill(1, x * h + a, x * h + b);
        prev = b;
      }
    },
  };
  return sink;
}

/** Feeds a column-major bitmap to `sink` column by column. */
export function feedBitmap(bits: Uint8Array, w: number, h: number, sink: ColumnSink): void {
  const runs = new Int32Array(h + 1);
  for (let x = 0; x < w; x++) {
    let n = 0;
    for (let y = 0; y < h; y++) {
      if (!bits[x * h + y]) continue;
      const a = y;
      while (y < h && bits[x * h + y]) y++;
      runs[2 * n] = a;
      runs[2 * n + 1] = y;
      n++;
    }
    sink.column(x, runs, n);
  }
}

/** Pixels whose centre is inside some polygon (each even-odd), column-major. */
export function rasterize(polygons: readonly number[][], w: number, h: number): Uint8Array {
  const out = new Uint8Array(w * h);
  for (const poly of polygons) {
    const k = poly.length / 2;
    for (let y = 0; y < h; y++) {
      const yc = y + 0.5;
      const xs: number[] = [];
      for (let i = 0; i < k; i++) {
        const x1 = poly[2 * i]!, y1 = poly[2 * i + 1]!;
        const x2 = poly[(2 * i + 2) % poly.length]!, y2 = poly[(2 * i + 3) % poly.length]!;
        if ((y1 <= yc && yc < y2) || (y2 <= yc && yc < y1)) xs.push(x1 + ((yc - y1) * (x2 - x1)) / (y2 - y1));
      }
      xs.sort((a, b) => a - b);
      for (let i = 0; i + 1 < xs.length; i += 2) {
        for (let x = Math.max(0, Math.ceil(xs[i]! - 0.5)); x < w && x + 0.5 < xs[i + 1]!; x++) out[x * h + y] = 1;
      }
    }
  }
  return out;
}

/** The shoelace area of a flat [x1, y1, …] polygon (absolute). */
export function shoelace(poly: readonly number[]): number {
  let s = 0;
  const k = poly.length / 2;
  for (let i = 0; i < k; i++) {
    const j = (i + 1) % k;
    s += poly[2 * i]! * poly[2 * j + 1]! - poly[2 * j]! * poly[2 * i + 1]!;
  }
  return Math.abs(s) / 2;
}

function flood(bits: Uint8Array, w: number, h: number, seeds: number[], value: number, eight: boolean, seen: Uint8Array): void {
  const stack = seeds.filter((p) => bits[p] === value && !seen[p]);
  for (const p of stack) seen[p] = 1;
  const steps = eight ? [[1, 0], [-1, 0], [0, 1], [0, -1], [1, 1], [1, -1], [-1, 1], [-1, -1]] : [[1, 0], [-1, 0], [0, 1], [0, -1]];
  while (stack.length) {
    const p = stack.pop()!;
    const x = Math.floor(p / h), y = p % h;
    for (const [dx, dy] of steps) {
      const nx = x + dx!, ny = y + dy!;
      if (nx < 0 || ny < 0 || nx >= w || ny >= h) continue;
      const q = nx * h + ny;
      if (seen[q] || bits[q] !== value) continue;
      seen[q] = 1;
      stack.push(q);
    }
  }
}

/** The number of 4-connected components of set pixels. */
export function components4(bits: Uint8Array, w: number, h: number): number {
  const seen = new Uint8Array(w * h);
  let n = 0;
  for (let p = 0; p < w * h; p++) {
    if (bits[p] && !seen[p]) {
      flood(bits, w, h, [p], 1, false, seen);
      n++;
    }
  }
  return n;
}

/** The mask plus every background pixel not 8-connected through background to the image border (its holes). */
export function filled(bits: Uint8Array, w: number, h: number): Uint8Array {
  const seen = new Uint8Array(w * h);
  const border: number[] = [];
  for (let x = 0; x < w; x++) border.push(x * h, x * h + h - 1);
  for (let y = 0; y < h; y++) border.push(y, (w - 1) * h + y);
  flood(bits, w, h, border, 0, true, seen);
  const out = new Uint8Array(w * h);
  for (let p = 0; p < w * h; p++) out[p] = bits[p] || !seen[p] ? 1 : 0;
  return out;
}

export function countSet(bits: Uint8Array): number {
  let n = 0;
  for (const b of bits) n += b;
  return n;
}
