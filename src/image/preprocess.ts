// RGB u8 (any size) -> pixel_values f32 [3,560,560] CHW, bit-exact with the reference's
// `F.interpolate((560,560), mode="bilinear", align_corners=False, antialias=True)` on the float32 image, then
// `* f32(1/255)`, `(x - mean) / std` (the recipe in shared/fixtures/rfdetr-synth/README.md "Preprocessing",
// MODEL.md §1.7). Not rounded to u8: rounding moves values by up to 9e-3 and flips fixture detections.
//
// The resize is separable, width pass first (u8 -> f32 intermediate H x 560), then the height pass on the f32
// intermediate. Per axis the weights are torch's antialiased triangle filter computed in f32 and normalised by
// an f32 division; each output is an fmaf chain from 0 over the taps in ascending order. JavaScript has no
// fmaf: fmaf.ts has an exact emulation (proof in its comment, test/image/fmaf.test.ts), inlined in the kernels.
//
// Cost (CPU time on this 2-core EPYC, bench/image): 640x480 about 9 ms, 4000x3000 about 106 ms, mostly
// the width pass (H x 560 x 3 x taps fmas; 4000x3000: 3000*560*3*15 = 76 M). Weights are computed once per
// (in, out) size and cached. `preprocessAsync` (preprocess-async.ts) runs it on a worker so the event loop stays free.
import type { RgbImage } from './decode.ts';

export const INPUT_SIZE = 560;
/** ImageNet mean/std as the reference holds them (float32). */
export const IMAGENET_MEAN: readonly [number, number, number] = [Math.fround(0.485), Math.fround(0.456), Math.fround(0.406)];
export const IMAGENET_STD: readonly [number, number, number] = [Math.fround(0.229), Math.fround(0.224), Math.fround(0.225)];
const INV_255 = Math.fround(1 / 255);

/** Per-axis resampling taps: output i reads in[start[i] .. start[i]+count[i]) with weights[i*maxTaps + j]. */
export interface AxisWeights {
  inSize: number;
  outSize: number;
  maxTaps: number;
  start: Int32Array;
  count: Int32Array;
  weights: Float32Array;
  /**
   * u8Exact[i] = 1 when every non-zero weight of output i is >= 2^-21. Then, for u8 inputs a, fround(a*w + acc)
   * IS fmaf(a, w, acc): each w is a multiple of 2^-44 (24-bit significand, exponent >= -21), so every product
   * a*w and every partial sum (rounding to f32 keeps multiples of 2^-44) is a multiple of 2^-44 and below
   * 255 * sum(w) < 2^8: 52 bits, so the f64 sum is exact and fround is the only rounding.
   */
  u8Exact: Uint8Array;
}

const f = Math.fround;

/** torch's `_compute_weights_aa` for the bilinear (triangle) filter, in float32, antialias on, align_corners off. */
export function computeAxisWeights(inSize: number, outSize: number): AxisWeights {
  if (!(Number.isInteger(inSize) && inSize > 0 && Number.isInteger(outSize) && outSize > 0)) {
    throw new RangeError(`computeAxisWeights: expected positive integer sizes but received ${inSize} -> ${outSize}`);
  }
  const scale = f(inSize / outSize);
  const support = scale >= 1 ? scale : 1; // f32(interp_size/2 * scale) with interp_size 2
  const invs = scale >= 1 ? f(1 / scale) : 1;
  const maxTaps = Math.ceil(support) * 2 + 1;
  const start = new Int32Array(outSize);
  const count = new Int32Array(outSize);
  const weights = new Float32Array(outSize * maxTaps);
  const u8Exact = new Uint8Array(outSize);
  for (let i = 0; i < outSize; i++) {
    const center = f(scale * (i + 0.5));
    const xmin = Math.max(Math.trunc(f(center - support) + 0.5), 0);
    const xmax = Math.min(Math.trunc(f(center + support) + 0.5), inSize);
    const n = xmax - xmin;
    if (n > maxTaps || n <= 0) throw new Error(`computeAxisWeights: ${n} taps for output ${i} of ${inSize} -> ${outSize} (max ${maxTaps})`);
    start[i] = xmin;
    count[i] = n;
    let total = 0;
    const base = i * maxTaps;
    for (let j = 0; j < n; j++) {
      // torch: filter((j + xmin - center + 0.5) * invscale): the int - float subtraction is f32, the +0.5 and the
      // product are double (0.5 is a double literal), the filter's argument is f32 again.
      let x = f((f(xmin + j - center) + 0.5) * invs);
      if (x < 0) x = -x;
      const w = x < 1 ? f(1 - x) : 0;
      weights[base + j] = w;
      total = f(total + w);
    }
    if (total !== 0) for (let j = 0; j < n; j++) weights[base + j] = f(weights[base + j]! / total);
    let exact = 1;
    for (let j = 0; j < n; j++) {
      const w = weights[base + j]!;
      if (w !== 0 && !(w >= 2 ** -21 && w <= 1)) exact = 0;
    }
    u8Exact[i] = exact;
  }
  return { inSize, outSize, maxTaps, start, count, weights, u8Exact };
}

const weightCache = new Map<number, AxisWeights>();
const WEIGHT_CACHE_MAX = 64;

/** Cached `computeAxisWeights` (a few kB each; the least recently inserted goes first past 64 sizes). */
export function axisWeights(inSize: number, outSize: number): AxisWeights {
  const key = inSize * 65536 + outSize;
  let w = weightCache.get(key);
  if (w === undefined) {
    w = computeAxisWeights(inSize, outSize);
    if (weightCache.size >= WEIGHT_CACHE_MAX) weightCache.delete(weightCache.keys().next().value!);
    weightCache.set(key, w);
  }
  return w;
}

function checkImage(img: RgbImage): void {
  const { width, height, data } = img;
  if (!(Number.isInteger(width) && width > 0 && Number.isInteger(height) && height > 0)) {
    throw new RangeError(`preprocess: expected a positive integer width and height but received ${width}x${height}`);
  }
  if (data.length !== width * height * 3) {
    throw new RangeError(`preprocess: expected ${width}*${height}*3 = ${width * height * 3} RGB bytes but received ${data.length}`);
  }
}

// The two passes inline `fmaf` (see fmaf.ts for why it is exact): p = a*b is exact, s = p + acc, r = fround(s) is
// the answer unless s is exactly an f32 midpoint and the f64 sum was inexact, which `fmaMidpoint` (width pass)
// or the TwoSum error test (height pass, where it measured faster: fewer sums are inexact than not f32) settle.
// Inlined by hand; the first tap is a plain rounded product (fmaf(a, w, 0) = round32(a*w)).

function fmaMidpoint(p: number, c: number, s: number, r: number, o: number): number {
  const bv = s - p;
  const e = (p - (s - bv)) + (c - bv);
  return e !== 0 && (e > 0) === (o > s) ? o : r;
}

/** Width pass, rows [y0, y1): u8 RGB interleaved -> f32 [rows][560][3] interleaved (`tmp`, row y at (y - y0)). */
export function resizeWidth(src: Uint8Array, width: number, wx: AxisWeights, tmp: Float32Array, y0: number, y1: number): void {
  const { start, count, weights, maxTaps, outSize, u8Exact } = wx;
  for (let y = y0; y < y1; y++) {
    const rowIn = y * width * 3;
    let o = (y - y0) * outSize * 3;
    for (let x = 0; x < outSize; x++) {
      const n = count[x]!;
      let q = rowIn + start[x]! * 3;
      let wb = x * maxTaps;
      let w = weights[wb++]!;
      let r = f(src[q]! * w);
      let g = f(src[q + 1]! * w);
      let b = f(src[q + 2]! * w);
      if (u8Exact[x] === 1) {
        // Proven exact without the midpoint check (see AxisWeights.u8Exact): 2.4x faster.
        for (let j = 1; j < n; j++) {
          q += 3;
          w = weights[wb++]!;
          r = f(src[q]! * w + r);
          g = f(src[q + 1]! * w + g);
          b = f(src[q + 2]! * w + b);
        }
      } else {
        for (let j = 1; j < n; j++) {
          q += 3;
          w = weights[wb++]!;
          let p = src[q]! * w;
          let s = p + r;
          let t = f(s);
          if (t !== s) {
            const m = s + (s - t);
            if (f(m) === m) t = fmaMidpoint(p, r, s, t, m);
          }
          r = t;
          p = src[q + 1]! * w;
          s = p + g;
          t = f(s);
          if (t !== s) {
            const m = s + (s - t);
            if (f(m) === m) t = fmaMidpoint(p, g, s, t, m);
          }
          g = t;
          p = src[q + 2]! * w;
          s = p + b;
          t = f(s);
          if (t !== s) {
            const m = s + (s - t);
            if (f(m) === m) t = fmaMidpoint(p, b, s, t, m);
          }
          b = t;
        }
      }
      tmp[o++] = r;
      tmp[o++] = g;
      tmp[o++] = b;
    }
  }
}

/**
 * Height pass and normalisation for output rows [y0, y1): f32 [H][560][3] (`tmp`, input row i at i - tmpRow0)
 * -> CHW f32 [3][560][560]. `acc` holds 560*3 floats.
 */
export function resizeHeightNormalise(tmp: Float32Array, tmpRow0: number, wy: AxisWeights, out: Float32Array, acc: Float32Array, y0: number, y1: number): void {
  const { start, count, weights, maxTaps } = wy;
  const rowLen = INPUT_SIZE * 3;
  const plane = INPUT_SIZE * INPUT_SIZE;
  const m0 = IMAGENET_MEAN[0], m1 = IMAGENET_MEAN[1], m2 = IMAGENET_MEAN[2];
  const s0 = IMAGENET_STD[0], s1 = IMAGENET_STD[1], s2 = IMAGENET_STD[2];
  for (let y = y0; y < y1; y++) {
    const n = count[y]!;
    const first = (start[y]! - tmpRow0) * rowLen;
    let w = weights[y * maxTaps]!;
    for (let k = 0; k < rowLen; k++) acc[k] = tmp[first + k]! * w;
    for (let j = 1; j < n; j++) {
      w = weights[y * maxTaps + j]!;
      const row = first + j * rowLen;
      for (let k = 0; k < rowLen; k++) {
        const c = acc[k]!;
        const p = tmp[row + k]! * w;
        const s = p + c;
        const bv = s - p;
        const e = (p - (s - bv)) + (c - bv);
        let t = f(s);
        if (e !== 0) {
          const m = s + (s - t);
          if (f(m) === m && (e > 0) === (m > s)) t = m;
        }
        acc[k] = t;
      }
    }
    let o = y * INPUT_SIZE;
    for (let x = 0, k = 0; x < INPUT_SIZE; x++, o++) {
      out[o] = f(f(f(acc[k++]! * INV_255) - m0) / s0);
      out[o + plane] = f(f(f(acc[k++]! * INV_255) - m1) / s1);
      out[o + 2 * plane] = f(f(f(acc[k++]! * INV_255) - m2) / s2);
    }
  }
}

// The width-pass intermediate is reused between calls (preprocess is synchronous, so never shared by two at
// once): allocating and zeroing it costs about as much as the height pass for small images. It only grows, up to
// 8192 * 560 * 3 floats (55 MB) for the largest accepted image.
let scratchBuf = new Float32Array(0);
function scratch(n: number): Float32Array {
  if (scratchBuf.length < n) scratchBuf = new Float32Array(n);
  return scratchBuf.subarray(0, n);
}
const accRow = new Float32Array(INPUT_SIZE * 3);

/**
 * pixel_values f32 [3,560,560] (CHW, batch dimension implied) for an RGB image of any size. Synchronous and
 * CPU-bound (tens of ms for big images); use `preprocessAsync` on a server. `out` (length 3*560*560) is reused
 * when given.
 */
export function preprocess(img: RgbImage, out?: Float32Array): Float32Array {
  checkImage(img);
  const n = 3 * INPUT_SIZE * INPUT_SIZE;
  if (out !== undefined && out.length !== n) throw new RangeError(`preprocess: out must hold ${n} floats but holds ${out.length}`);
  const dst = out ?? new Float32Array(n);
  const wx = axisWeights(img.width, INPUT_SIZE);
  const wy = axisWeights(img.height, INPUT_SIZE);
  const tmp = scratch(img.height * INPUT_SIZE * 3);
  resizeWidth(img.data, img.width, wx, tmp, 0, img.height);
  resizeHeightNormalise(tmp, 0, wy, dst, accRow, 0, INPUT_SIZE);
  return dst;
}
