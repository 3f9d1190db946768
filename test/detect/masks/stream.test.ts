// The streamed upsample (src/detect/masks/columns.ts, output-sensitive) against a per-pixel evaluation of
// PyTorch's bilinear align_corners=False formula written here, on random logit fields of odd sizes (up- and
// downsampling, exact zeros, a NaN, all-positive and all-negative planes); and the RLE encoder's counts on
// masks whose counts are known; the RLE streamed back (what the drawing paints) gives the same pixels.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { streamMask } from '../../../src/detect/masks/columns.ts';
import { maskGrid } from '../../../src/detect/masks/grid.ts';
import { maskRle } from '../../../src/detect/masks/encode.ts';
import { RleEncoder, streamRle } from '../../../src/detect/masks/rle.ts';
import { bitmapSink, feedBitmap } from '../../helpers/mask-bitmaps.ts';

const f = Math.fround;

/** torch's source index and weight of output pixel d (area_pixel_compute_source_index, guard_index_and_lambda). */
function source(side: number, size: number, d: number): [number, number, number] {
  let src = f(f(f(side / size) * f(d + 0.5)) - 0.5);
  if (src < 0) src = 0;
  const i0 = Math.min(Math.floor(src), side - 1);
  const l = Math.min(Math.max(f(src - i0), 0), 1);
  return [i0, Math.min(i0 + 1, side - 1), l];
}

function perPixel(L: Float32Array, M: number, w: number, h: number): Uint8Array {
  const out = new Uint8Array(w * h);
  for (let x = 0; x < w; x++) {
    const [j0, j1, lx] = source(M, w, x);
    for (let y = 0; y < h; y++) {
      const [i0, i1, ly] = source(M, h, y);
      const c0 = L[i0 * M + j0]! * f(1 - lx) + L[i0 * M + j1]! * lx;
      const c1 = L[i1 * M + j0]! * f(1 - lx) + L[i1 * M + j1]! * lx;
      out[x * h + y] = c0 * f(1 - ly) + c1 * ly > 0 ? 1 : 0;
    }
  }
  return out;
}

/** A smooth-ish random field (sum of a few waves) plus noise, so there are large uniform areas and boundaries. */
function field(M: number, seed: number): Float32Array {
  let s = seed >>> 0;
  const rnd = () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
  const [a, b, c, p] = [rnd() * 0.9, rnd() * 0.9, rnd() * 6 - 3, rnd() * 6];
  const L = new Float32Array(M * M);
  for (let i = 0; i < M; i++) for (let j = 0; j < M; j++) L[i * M + j] = 10 * Math.sin(a * i + p) * Math.cos(b * j) + c + (rnd() - 0.5) * 4;
  return L;
}

test('the streamed mask equals the per-pixel upsample on random fields, up and down, odd sizes; so does its RLE streamed back', () => {
  const cases: [number, number, number][] = [[5, 7, 3], [8, 37, 53], [13, 200, 91], [78, 640, 480], [96, 101, 1000], [31, 17, 29], [1, 9, 4]];
  let set = 0, total = 0;
  for (const [M, w, h] of cases) {
    for (let seed = 1; seed <= 6; seed++) {
      const L = field(M, seed * 7919 + M);
      if (seed === 2) L[Math.floor(M * M / 2)] = NaN;
      if (seed === 3) for (let k = 0; k < M * M; k += 3) L[k] = 0;
      if (seed === 4) L.fill(2.5);
      if (seed === 5) L.fill(-1);
      const sink = bitmapSink(w, h);
      streamMask(L, maskGrid(M, w, h), sink);
      assert.equal(sink.columns, w);
      const want = perPixel(L, M, w, h);
      const back = bitmapSink(w, h);
      streamRle(maskRle(L, maskGrid(M, w, h)), back);
      assert.deepEqual(back.bits, sink.bits, `M=${M} ${w}×${h} seed ${seed}: the RLE streamed back differs`);
      for (let p = 0; p < w * h; p++) {
        if (sink.bits[p] !== want[p]) assert.fail(`M=${M} ${w}×${h} seed ${seed}: pixel (${Math.floor(p / h)}, ${p % h}) is ${sink.bits[p]}, the per-pixel upsample says ${want[p]}`);
        set += want[p]!;
      }
      total += w * h;
    }
  }
  assert.ok(set > total / 10 && set < total * 0.9, `the fields set ${set} of ${total} pixels: not a mix`);
});

test('streamMask refuses logits that are not M×M, naming both sizes', () => {
  assert.throws(() => streamMask(new Float32Array(10), maskGrid(3, 4, 4), bitmapSink(4, 4)), /expected 3×3 = 9 mask logits but received 10/);
});

function countsOf(bits: Uint8Array, w: number, h: number): number[] {
  const rle = new RleEncoder(w, h);
  feedBitmap(bits, w, h, rle);
  return Array.from(rle.finish());
}

test('RLE counts: column-major, starting with a run of 0s, runs joined across columns', () => {
  assert.deepEqual(countsOf(new Uint8Array(6), 3, 2), [6]);
  assert.deepEqual(countsOf(new Uint8Array(6).fill(1), 3, 2), [0, 6]);
  // 3 wide, 2 high, column-major: (0,0) (0,1) | (1,0) (1,1) | (2,0) (2,1)
  assert.deepEqual(countsOf(Uint8Array.from([1, 0, 0, 1, 1, 0]), 3, 2), [0, 1, 2, 2, 1]);
  assert.deepEqual(countsOf(Uint8Array.from([0, 1, 1, 0, 0, 1]), 3, 2), [1, 2, 2, 1]);
});
