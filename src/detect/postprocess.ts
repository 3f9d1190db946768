// The contract's post-process, from the model's raw outputs to detections, with the reference's float32
// semantics (shared/fixtures/rfdetr-synth/README.md "detections.json"; MODEL.md §1.6):
//
// * score_q = max_c sigmoid(logits[q, c]); label = argmax, lowest class index on ties. sigmoid is evaluated as
//   torch 1.13's vectorised float32 kernel does: 1 / (1 + exp(0 - x)), each step in f32, with exp being SLEEF's
//   expf_u10 (the FMA variant torch's AVX2/AVX-512 kernels call). This reproduces every fixture score bit for
//   bit (621 of 621); a correctly rounded exp differs by 1 ulp on 11 of them, an f64 sigmoid on 153. torch's
//   vectorised loop runs 2 vectors (32 floats with AVX-512) per step and leaves the remainder of the flattened
//   [numQueries*numClasses] tensor to its scalar path (std::exp, i.e. a correctly rounded expf in practice): for
//   300x91 that is the last 4 logits (query 299, classes 87..90), which get `sigmoidScalarF32`.
// * keep score > threshold, compared in float32 (torch casts the Python float to the tensor's dtype, so a
//   threshold of 0.3 means f32(0.3) = 0.300000011920929).
// * sort by score descending, then query index ascending; keep the first maxDetections.
// * box: x0 = cx - 0.5*max(w, 0), y0 = cy - 0.5*max(h, 0), x1 = cx + 0.5*max(w, 0), y1 = cy + 0.5*max(h, 0) in
//   float32, times (W, H, W, H) in float32, then x clamped to [0, W] and y to [0, H]. Boxes entirely outside the
//   image clamp to zero area and are kept (the reference keeps them).
// * box_cxcywh_norm is the raw model box (normalised cxcywh, unclamped, may fall outside [0, 1]).
import { fmaf } from './fmaf.ts';

export interface Detection {
  label: string;
  /** Class index = COCO-91 id for the published model. */
  label_id: number;
  score: number;
  /** [x1, y1, x2, y2] in original-image pixels, clamped to the image. */
  box: [number, number, number, number];
  /** The model's own box: normalised [cx, cy, w, h], unclamped. */
  box_cxcywh_norm: [number, number, number, number];
  /** Decoder query slot (0..numQueries-1) the detection came from. */
  query: number;
}

export interface RawOutputs {
  /** f32 [numQueries x numClasses], pre-sigmoid. */
  logits: Float32Array;
  /** f32 [numQueries x 4], normalised cxcywh. */
  predBoxes: Float32Array;
  numQueries: number;
  numClasses: number;
}

export interface PostprocessOptions {
  /** Original image size in pixels. */
  width: number;
  height: number;
  /** Keep score > threshold (0..1). */
  threshold: number;
  /** At most this many detections (>= 0). */
  maxDetections: number;
  /** Label per class index; a missing entry becomes the id as a string. */
  labels: readonly string[];
}

const f = Math.fround;

const R_LN2F = f(1.442695040888963407359924681001892137426645954152985934135449406931);
const L2U_F = f(0.693145751953125);
const L2L_F = f(1.428606765330187045e-06);
const EXP_POLY = [0.000198527617612853646278381, 0.00139304355252534151077271, 0.00833336077630519866943359,
  0.0416664853692054748535156, 0.166666671633720397949219, 0.5].map(f);

function rintEven(x: number): number {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** SLEEF `xexpf` (u10, FMA): Cody-Waite reduction by ln 2, a degree-5 polynomial, scale by 2^q; f32 throughout. */
export function expfSleef(d: number): number {
  if (d < -104) return 0;
  if (d > 100) return Infinity;
  if (d !== d) return NaN;
  const q = rintEven(f(d * R_LN2F));
  let s = fmaf(q, -L2U_F, d);
  s = fmaf(q, -L2L_F, s);
  let u = EXP_POLY[0]!;
  for (let i = 1; i < EXP_POLY.length; i++) u = fmaf(u, s, EXP_POLY[i]!);
  u = f(1 + fmaf(f(s * s), u, s));
  return f(u * 2 ** q);
}

/** torch's float32 sigmoid (vectorised CPU kernel): 1 / (1 + exp(0 - x)), each step rounded to float32. */
export function sigmoidF32(x: number): number {
  return f(1 / f(1 + expfSleef(f(0 - x))));
}

/** torch's scalar float32 sigmoid (the vector loop's remainder): 1 / (1 + expf(-x)) with expf correctly rounded. */
export function sigmoidScalarF32(x: number): number {
  return f(1 / f(1 + f(Math.exp(-x))));
}

/** Floats per step of torch's vectorised loop (2 x 16 with AVX-512, the reference machine); the rest is scalar. */
const TORCH_VECTOR_STEP = 32;

function checkRaw(raw: RawOutputs): void {
  const { numQueries: q, numClasses: c } = raw;
  if (!(Number.isInteger(q) && q > 0 && Number.isInteger(c) && c > 0)) {
    throw new RangeError(`postprocess: expected positive integer numQueries and numClasses but received ${q} and ${c}`);
  }
  if (raw.logits.length !== q * c) throw new RangeError(`postprocess: logits must hold ${q}*${c} = ${q * c} floats but hold ${raw.logits.length}`);
  if (q > 2 ** 22) throw new RangeError(`postprocess: expected at most ${2 ** 22} queries but received ${q}`);
  if (raw.predBoxes.length !== q * 4) throw new RangeError(`postprocess: predBoxes must hold ${q}*4 = ${q * 4} floats but hold ${raw.predBoxes.length}`);
}

/**
 * A logit below which the float32 sigmoid cannot exceed `thr`, so most of the 300 queries skip it (half the
 * post-process's time at 300x91: 0.06 of 0.11 ms). The exact logit of thr less 0.05: there the exact sigmoid is
 * at least 0.05 * thr * (1 - thr) * 0.95 below thr, which for thr in [1e-4, 1 - 1e-4] is over 4e-6, while the f32
 * sigmoid is within 2^-22 (2.4e-7) of the exact one (test/detect/postprocess.test.ts). Outside that range
 * every query takes the sigmoid.
 */
export function sigmoidSkipBelow(thr: number): number {
  return thr >= 1e-4 && thr <= 1 - 1e-4 ? Math.log(thr / (1 - thr)) - 0.05 : -Infinity;
}

/** Detections for one image, sorted by score descending (ties by query ascending). */
export function postprocess(raw: RawOutputs, opts: PostprocessOptions): Detection[] {
  checkRaw(raw);
  const { width: W, height: H, threshold, maxDetections, labels } = opts;
  if (!(W > 0 && H > 0 && Number.isFinite(W) && Number.isFinite(H))) throw new RangeError(`postprocess: expected a positive image size but received ${W}x${H}`);
  if (!(threshold >= 0 && threshold <= 1)) throw new RangeError(`postprocess: expected threshold in 0..1 but received ${threshold}`);
  if (!(Number.isInteger(maxDetections) && maxDetections >= 0)) throw new RangeError(`postprocess: expected an integer maxDetections >= 0 but received ${maxDetections}`);
  const { logits, predBoxes, numQueries, numClasses } = raw;
  const thr = f(threshold);
  const total = numQueries * numClasses;
  const scalarFrom = total - (total % TORCH_VECTOR_STEP);
  const skipBelow = sigmoidSkipBelow(thr);
  // Each kept query as one number that sorts in the contract's order: its score's float32 bits (monotone in the
  // score for positive floats, and a kept score is > thr >= 0) times `span`, plus span-1-query, so equal scores
  // put the lower query last; sorted ascending by the typed array's own numeric sort and read from the end. A
  // comparator sort of objects took ~half the post-process when all 300 queries pass (test-sleep's logits;
  // bench/server/RESULTS.md §9). Exact: bits < 2^31 and span <= 2^22, so every key is an integer below 2^53.
  const span = 2 ** Math.ceil(Math.log2(numQueries + 1));
  const keys = new Float64Array(numQueries);
  const labelOf = new Int32Array(numQueries);
  const scoreOf = new Float32Array(numQueries);
  const bits = new Uint32Array(scoreOf.buffer);
  const logitOf = new Float32Array(numQueries);
  const logitBits = new Uint32Array(logitOf.buffer);
  const candidates = new Int32Array(numQueries);
  let numCandidates = 0;
  let kept = 0;
  const keep = (q: number) => {
    const logit = logitOf[q]!;
    const score = q * numClasses + labelOf[q]! >= scalarFrom ? sigmoidScalarF32(logit) : sigmoidF32(logit);
    if (!(score > thr)) return NaN;
    scoreOf[q] = score;
    keys[kept++] = bits[q]! * span + (span - 1 - q);
    return score;
  };
  for (let q = 0; q < numQueries; q++) {
    // sigmoid is monotone, so the argmax of the logits is the argmax of the scores; strict > keeps the lowest
    // index on ties. NaN logits never win (and a row of NaN keeps class 0 with a NaN score, which is not kept).
    const row = q * numClasses;
    let best = 0;
    let bestLogit = logits[row]!;
    let c = 1;
    // Leading NaNs: the first number after them takes the lead; from there a strict > alone decides.
    for (; bestLogit !== bestLogit && c < numClasses; c++) {
      const v = logits[row + c]!;
      if (v === v) {
        best = c;
        bestLogit = v;
      }
    }
    for (; c < numClasses; c++) {
      const v = logits[row + c]!;
      if (v > bestLogit) {
        best = c;
        bestLogit = v;
      }
    }
    if (bestLogit < skipBelow) continue;
    logitOf[q] = bestLogit;
    labelOf[q] = best;
    candidates[numCandidates++] = q;
  }
  if (numCandidates <= maxDetections) {
    for (let i = 0; i < numCandidates; i++) keep(candidates[i]!);
  } else {
    // More candidates than places: the sigmoids in descending logit order, stopping once no later query can
    // reach the lowest of the first maxDetections scores kept: the f32 sigmoid is within 2^-22 of the exact one
    // (test/detect/postprocess.test.ts) and the exact one falls with the logit, so a query whose exact sigmoid
    // plus 2^-20 is below that score is below every kept one, as is everything after it. With test-sleep's
    // logits (all 300 queries pass, 100 kept) that is ~100 sigmoids instead of 300 (bench/server/RESULTS.md §9).
    // The logit's float32 bits made monotone over both signs (negatives reversed below the positives), times span.
    for (let i = 0; i < numCandidates; i++) {
      const q = candidates[i]!;
      const u = logitBits[q]!;
      keys[i] = (u >= 0x80000000 ? 0xffffffff - u : u + 0x80000000) * span + (span - 1 - q);
    }
    const byLogit = keys.slice(0, numCandidates).sort();
    let lowestOfFirst = Infinity;
    for (let i = numCandidates - 1; i >= 0; i--) {
      const q = span - 1 - (byLogit[i]! % span);
      if (kept >= maxDetections && 1 / (1 + Math.exp(-logitOf[q]!)) + 2 ** -20 < lowestOfFirst) break;
      const score = keep(q);
      if (kept <= maxDetections && score === score && score < lowestOfFirst) lowestOfFirst = score;
    }
  }
  const order = keys.subarray(0, kept).sort();
  const n = Math.min(kept, maxDetections);
  const Wf = f(W);
  const Hf = f(H);
  const out: Detection[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const query = span - 1 - (order[kept - 1 - i]! % span);
    const label = labelOf[query]!;
    const score = scoreOf[query]!;
    const o = query * 4;
    const cx = predBoxes[o]!, cy = predBoxes[o + 1]!, w = predBoxes[o + 2]!, h = predBoxes[o + 3]!;
    const hw = f(0.5 * Math.max(w, 0));
    const hh = f(0.5 * Math.max(h, 0));
    const box: [number, number, number, number] = [
      clamp(f(f(cx - hw) * Wf), Wf),
      clamp(f(f(cy - hh) * Hf), Hf),
      clamp(f(f(cx + hw) * Wf), Wf),
      clamp(f(f(cy + hh) * Hf), Hf),
    ];
    out[i] = { label: labels[label] ?? String(label), label_id: label, score, box, box_cxcywh_norm: [cx, cy, w, h], query };
  }
  return out;
}

function clamp(v: number, hi: number): number {
  return v < 0 ? 0 : v > hi ? hi : v;
}

/** The `return_raw` shape: logits [numQueries][numClasses] and pred_boxes [numQueries][4] as nested arrays. */
export function rawToNested(logits: Float32Array, predBoxes: Float32Array, numQueries: number, numClasses: number): { logits: number[][]; pred_boxes: number[][] } {
  checkRaw({ logits, predBoxes, numQueries, numClasses });
  const l: number[][] = new Array(numQueries);
  const b: number[][] = new Array(numQueries);
  for (let q = 0; q < numQueries; q++) {
    l[q] = Array.from(logits.subarray(q * numClasses, (q + 1) * numClasses));
    b[q] = Array.from(predBoxes.subarray(q * 4, q * 4 + 4));
  }
  return { logits: l, pred_boxes: b };
}
