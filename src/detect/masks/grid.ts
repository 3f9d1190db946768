// Where each pixel of the original image samples the R/4 mask logits: PyTorch's bilinear upsample with
// align_corners=False (upstream's `F.interpolate(pred_masks, size=(H, W), mode='bilinear')`), one table per
// axis, shared by every detection of an image. The arithmetic is torch's float32 CPU kernel's
// (area_pixel_compute_scale / area_pixel_compute_source_index / guard_index_and_lambda): scale = M / out,
// src = scale·(dst + 0.5) − 0.5 clamped at 0 below, i0 = min(floor(src), M − 1), λ = clamp(src − i0, 0, 1),
// i1 = min(i0 + 1, M − 1); all of it rounded to float32 as torch's is. A different rounding only moves pixels
// whose upsampled logit is within ~1e-5 of 0 (the fixtures' `mask_near_zero` set is |logit| < 1e-3).
const f = Math.fround;

export interface Axis {
  /** Output pixels along this axis. */
  size: number;
  /** Lower source index of each output pixel. */
  i0: Int32Array;
  /** Weight of source index i0 + 1 (clamped to M − 1) for each output pixel. */
  lambda: Float32Array;
  /** Weight of source index i0: f32(1 − λ). */
  mu: Float32Array;
  /** Output pixels whose i0 is i are [start[i], start[i + 1]) (i0 never decreases along the axis); length M + 1. */
  start: Int32Array;
}

/** The sampling table of one axis: `size` output pixels from `side` source values. */
export function axisTable(side: number, size: number): Axis {
  if (!(Number.isInteger(side) && side > 0 && Number.isInteger(size) && size > 0)) {
    throw new RangeError(`mask upsample: expected positive integer sizes but received a mask side of ${side} and an output of ${size}`);
  }
  const scale = f(side / size);
  const i0 = new Int32Array(size);
  const lambda = new Float32Array(size);
  const mu = new Float32Array(size);
  const start = new Int32Array(side + 1);
  for (let d = 0; d < size; d++) {
    let src = f(f(scale * f(d + 0.5)) - 0.5);
    if (src < 0) src = 0;
    const i = Math.min(Math.floor(src), side - 1);
    i0[d] = i;
    const l = Math.min(Math.max(f(src - i), 0), 1);
    lambda[d] = l;
    mu[d] = f(1 - l);
  }
  // start[i] = first d with i0[d] >= i.
  let d = 0;
  for (let i = 0; i <= side; i++) {
    while (d < size && i0[d]! < i) d++;
    start[i] = d;
  }
  return { size, i0, lambda, mu, start };
}

/** Both axes' tables for upsampling an M×M mask to a width × height image. */
export interface MaskGrid {
  side: number;
  width: number;
  height: number;
  x: Axis;
  y: Axis;
}

export function maskGrid(side: number, width: number, height: number): MaskGrid {
  return { side, width, height, x: axisTable(side, width), y: axisTable(side, height) };
}
