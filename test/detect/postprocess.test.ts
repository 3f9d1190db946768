import { test } from 'node:test';
import assert from 'node:assert/strict';
import { expfSleef, postprocess, rawToNested, sigmoidF32, sigmoidScalarF32, sigmoidSkipBelow, type RawOutputs } from '../../src/detect/postprocess.ts';

const f = Math.fround;

/** Raw outputs from per-query rows: logits[q] (numClasses each) and box[q] (cxcywh). */
function raw(logits: number[][], boxes: number[][]): RawOutputs {
  return {
    logits: Float32Array.from(logits.flat()),
    predBoxes: Float32Array.from(boxes.flat()),
    numQueries: logits.length,
    numClasses: logits[0]!.length,
  };
}

const LABELS = ['N/A', 'person', 'bicycle', 'car'];
const opts = { width: 640, height: 480, threshold: 0.5, maxDetections: 100, labels: LABELS };
const logitOf = (p: number) => Math.log(p / (1 - p));

test('sigmoidF32: float32 results close to the exact sigmoid, saturating at the ends', () => {
  for (let x = -20; x <= 20; x += 0.37) {
    const exact = 1 / (1 + Math.exp(-x));
    const s = sigmoidF32(f(x));
    assert.equal(s, f(s));
    assert.ok(Math.abs(s - exact) <= 2 ** -22, `sigmoid(${x}) = ${s}, exact ${exact}`);
  }
  assert.equal(sigmoidF32(0), 0.5);
  assert.equal(sigmoidF32(200), 1);
  assert.equal(sigmoidF32(-200), 0);
  assert.ok(Number.isNaN(sigmoidF32(NaN)));
});

test('expfSleef: within 1 ulp of exp over [-100, 88]', () => {
  for (let x = -100; x < 88; x += 0.0123) {
    const xf = f(x);
    const got = expfSleef(xf);
    const want = Math.exp(xf);
    const ulp = Math.max(2 ** (Math.floor(Math.log2(want)) - 23), 2 ** -149); // subnormal ulp below 2^-126
    assert.ok(Math.abs(got - want) <= ulp, `exp(${xf}) = ${got}, exact ${want}`);
  }
});

test('postprocess: label is the argmax (lowest index on ties), sorted by score desc then query asc', () => {
  const r = raw(
    [
      [0, 1, 1, -5], // tie between classes 1 and 2 -> 1
      [-9, -9, 2, -9],
      [0, 1, 1, -5], // same score as query 0 -> after it
      [3, -9, -9, -9],
    ],
    [[0.5, 0.5, 0.1, 0.1], [0.5, 0.5, 0.2, 0.2], [0.5, 0.5, 0.3, 0.3], [0.5, 0.5, 0.4, 0.4]],
  );
  const d = postprocess(r, opts);
  assert.deepEqual(d.map((x) => [x.query, x.label_id, x.label]), [[3, 0, 'N/A'], [1, 2, 'bicycle'], [0, 1, 'person'], [2, 1, 'person']]);
  assert.equal(d[2]!.score, d[3]!.score);
  assert.equal(d[0]!.score, sigmoidF32(3));
  assert.deepEqual(d[1]!.box_cxcywh_norm, [0.5, 0.5, f(0.2), f(0.2)]);
});

test('postprocess: boxes scale to pixels, clamp to the image, negative sizes collapse, outside boxes kept at zero area', () => {
  const L = [[5, -9]];
  const one = (box: number[]) => postprocess(raw(L, [box]), { ...opts, labels: ['a', 'b'] })[0]!.box;
  assert.deepEqual(one([0.5, 0.5, 0.5, 0.5]), [160, 120, 480, 360]);
  assert.deepEqual(one([0, 0, 0.5, 0.5]), [0, 0, 160, 120]); // clamped at 0
  assert.deepEqual(one([1, 1, 0.5, 0.5]), [480, 360, 640, 480]); // clamped at W, H
  assert.deepEqual(one([0.5, 0.5, -0.2, 0.1]), [320, f(f(0.5 - f(0.05)) * 480), 320, f(f(0.5 + f(0.05)) * 480)]); // max(w, 0)
  assert.deepEqual(one([1.5, -0.5, 0.2, 0.2]), [640, 0, 640, 0]); // entirely outside: kept, zero area
  assert.deepEqual(one([-2, 3, 0.1, 0.1]), [0, 480, 0, 480]);
  // float32 corners: cx - w/2 rounded to f32 before the multiply
  const cx = f(0.123456789), w = f(0.0987654321);
  const got = one([cx, 0.5, w, 0.1]);
  assert.equal(got[0], f(f(cx - f(0.5 * w)) * 640));
  assert.equal(got[2], f(f(cx + f(0.5 * w)) * 640));
});

test('postprocess: threshold is strict (>) and compared in float32, like torch', () => {
  const s = sigmoidF32(f(logitOf(0.3)));
  const r = raw([[f(logitOf(0.3)), -50]], [[0.5, 0.5, 0.1, 0.1]]);
  assert.equal(postprocess(r, { ...opts, threshold: s }).length, 0, 'score == threshold is not kept');
  // The largest double below s still rounds to s in float32, so it is not kept either (torch: f32(thr)).
  const below = s - 2 ** -50;
  assert.ok(below < s && f(below) === s);
  assert.equal(postprocess(r, { ...opts, threshold: below }).length, 0);
  // One f32 ulp below keeps it.
  const ulpBelow = f(s - 2 ** -25);
  assert.ok(ulpBelow < s);
  assert.equal(postprocess(r, { ...opts, threshold: ulpBelow }).length, 1);
  // Edges of the range: 0 keeps everything with a positive score, 1 keeps nothing (scores never exceed 1).
  const many = raw([[50, 0], [-50, -60], [0, -1]], [[0.5, 0.5, 0.1, 0.1], [0.5, 0.5, 0.1, 0.1], [0.5, 0.5, 0.1, 0.1]]);
  assert.deepEqual(postprocess(many, { ...opts, threshold: 0 }).map((d) => d.query), [0, 2, 1]);
  assert.equal(postprocess(many, { ...opts, threshold: 1 }).length, 0);
});

test('postprocess: maxDetections caps after sorting (the best survive)', () => {
  const n = 300;
  const logits = Array.from({ length: n }, (_, q) => [((q * 37) % 300) / 50, -9]);
  const boxes = Array.from({ length: n }, () => [0.5, 0.5, 0.1, 0.1]);
  const all = postprocess(raw(logits, boxes), { ...opts, threshold: 0, maxDetections: 300 });
  assert.equal(all.length, 300);
  for (let i = 1; i < all.length; i++) assert.ok(all[i - 1]!.score > all[i]!.score || (all[i - 1]!.score === all[i]!.score && all[i - 1]!.query < all[i]!.query));
  const top = postprocess(raw(logits, boxes), { ...opts, threshold: 0, maxDetections: 7 });
  assert.deepEqual(top, all.slice(0, 7));
  assert.equal(postprocess(raw(logits, boxes), { ...opts, threshold: 0, maxDetections: 1 }).length, 1);
  assert.equal(postprocess(raw(logits, boxes), { ...opts, threshold: 0, maxDetections: 0 }).length, 0);
});

test('postprocess: the last (numQueries*numClasses mod 32) logits use the scalar sigmoid, the rest SLEEF', () => {
  // Find a logit where the two float32 sigmoids differ by an ulp (they do on about 2% of values).
  let x = 0.1;
  while (sigmoidF32(f(x)) === sigmoidScalarF32(f(x))) x += 0.001;
  const l = f(x);
  const n = 300;
  const classes = 91; // 27300 = 853*32 + 4: query 299, classes 87..90 are the scalar remainder
  const logits = Array.from({ length: n }, () => new Array<number>(classes).fill(-50));
  logits[298]![90] = l;
  logits[299]![86] = l - 1;
  logits[299]![88] = l;
  const boxes = Array.from({ length: n }, () => [0.5, 0.5, 0.1, 0.1]);
  const d = postprocess(raw(logits, boxes), { ...opts, threshold: 0.01 });
  const byQuery = new Map(d.map((x) => [x.query, x]));
  assert.equal(byQuery.get(298)!.score, sigmoidF32(l));
  assert.equal(byQuery.get(299)!.label_id, 88);
  assert.equal(byQuery.get(299)!.score, sigmoidScalarF32(l));
  assert.notEqual(sigmoidF32(l), sigmoidScalarF32(l));
});

test('postprocess: a missing label name falls back to the id; NaN logits never win', () => {
  const d = postprocess(raw([[-9, -9, -9, -9, 4]], [[0.5, 0.5, 0.1, 0.1]]), opts);
  assert.equal(d[0]!.label, '4');
  const n = postprocess(raw([[NaN, 2, NaN, 1]], [[0.5, 0.5, 0.1, 0.1]]), opts);
  assert.equal(n[0]!.label_id, 1);
  assert.equal(postprocess(raw([[NaN, NaN, NaN, NaN]], [[0.5, 0.5, 0.1, 0.1]]), opts).length, 0);
});

test('postprocess and rawToNested: wrong shapes and options are RangeErrors that name the problem', () => {
  const r = raw([[1, 2]], [[0.5, 0.5, 0.1, 0.1]]);
  assert.throws(() => postprocess({ ...r, numClasses: 3 }, opts), /logits must hold 1\*3 = 3 floats but hold 2/);
  assert.throws(() => postprocess({ ...r, predBoxes: new Float32Array(3) }, opts), /predBoxes must hold 1\*4 = 4/);
  assert.throws(() => postprocess(r, { ...opts, threshold: NaN }), /threshold in 0\.\.1 but received NaN/);
  assert.throws(() => postprocess(r, { ...opts, threshold: 1.1 }), /threshold in 0\.\.1/);
  assert.throws(() => postprocess(r, { ...opts, maxDetections: 1.5 }), /maxDetections >= 0 but received 1.5/);
  assert.throws(() => postprocess(r, { ...opts, width: 0 }), /positive image size but received 0x480/);
  assert.throws(() => rawToNested(r.logits, r.predBoxes, 2, 2), /logits must hold 2\*2 = 4/);
});

test('rawToNested: [numQueries][numClasses] and [numQueries][4] with the f32 values unchanged', () => {
  const logits = Float32Array.from({ length: 300 * 91 }, (_, i) => f(Math.sin(i) * 10));
  const boxes = Float32Array.from({ length: 300 * 4 }, (_, i) => f(Math.cos(i)));
  const n = rawToNested(logits, boxes, 300, 91);
  assert.equal(n.logits.length, 300);
  assert.ok(n.logits.every((row) => row.length === 91));
  assert.equal(n.pred_boxes.length, 300);
  assert.ok(n.pred_boxes.every((row) => row.length === 4));
  assert.equal(n.logits[123]![45], logits[123 * 91 + 45]);
  assert.equal(n.pred_boxes[299]![3], boxes[299 * 4 + 3]);
  const back = JSON.parse(JSON.stringify(n)) as typeof n;
  assert.deepEqual(Float32Array.from(back.logits.flat()), logits, 'JSON round-trips to the same f32 values');
});

test('postprocess: the queries it skips without a sigmoid could not pass the threshold, from 1e-4 to 1 - 1e-4', () => {
  for (const t of [1.01e-4, 0.001, 0.05, 0.3, 0.5, 0.7, 0.95, 0.999, 1 - 1.01e-4]) {
    const thr = f(t);
    const below = sigmoidSkipBelow(thr);
    assert.ok(Number.isFinite(below), `threshold ${t} is in the skipped range`);
    // The largest f32 logits the skip applies to, and the queries on both sides of it through postprocess
    // (2208 queries x 2 classes: a multiple of 32, so no query takes the scalar sigmoid).
    let x = f(below);
    if (x >= below) x = f(x - Math.abs(x) * 2 ** -23 - 2 ** -149);
    const xs: number[] = [];
    for (let i = 0; i < 2000; i++, x = f(x - Math.max(Math.abs(x) * 2 ** -24, 2 ** -149) * 64)) {
      assert.ok(sigmoidF32(x) <= thr, `logit ${x} < ${below} is skipped at threshold ${t}, but its sigmoid ${sigmoidF32(x)} passes`);
      xs.push(x);
    }
    for (let y = f(below); xs.length < 2208; y = f(y + 0.001)) xs.push(y);
    const rows = xs.map((v) => [v, -30]);
    const got = postprocess(raw(rows, rows.map(() => [0.5, 0.5, 0.1, 0.1])), { ...opts, threshold: t, maxDetections: rows.length });
    const want = xs.flatMap((v, q) => (sigmoidF32(v) > thr ? [q] : []));
    assert.deepEqual(got.map((d) => d.query).sort((a, b) => a - b), want, `threshold ${t}`);
  }
  assert.equal(sigmoidSkipBelow(0), -Infinity);
  assert.equal(sigmoidSkipBelow(1), -Infinity);
});

test('postprocess: the order is the comparator sort of (score desc, query asc), with many equal scores, for odd query counts', () => {
  for (const numQueries of [1, 7, 300, 513]) {
    const numClasses = 5;
    // Few distinct logits, so scores repeat across queries (and the saturated ones equal 1).
    const logits = Float32Array.from({ length: numQueries * numClasses }, (_, i) => [0.25, 3, -1, 0.25, 40][(i * 7 + (i >> 3)) % 5]!);
    const predBoxes = Float32Array.from({ length: numQueries * 4 }, (_, i) => ((i * 13) % 97) / 97);
    const got = postprocess({ logits, predBoxes, numQueries, numClasses }, { ...opts, threshold: 0.1, maxDetections: 1000 });
    const want = [...got].sort((a, b) => (b.score - a.score) || (a.query - b.query));
    assert.deepEqual(got.map((d) => d.query), want.map((d) => d.query), `numQueries ${numQueries}`);
    assert.equal(got.length, numQueries);
    if (numQueries > 1) assert.ok(got.some((d, i) => i > 0 && d.score === got[i - 1]!.score), 'the case has ties');
    const capped = postprocess({ logits, predBoxes, numQueries, numClasses }, { ...opts, threshold: 0.1, maxDetections: 3 });
    assert.deepEqual(capped, got.slice(0, 3));
  }
});

test('postprocess: capped below the queries that pass, equal scores from different logits still go by query', () => {
  // Every logit saturates the f32 sigmoid to 1, the larger logits on the later queries: the three kept are
  // queries 0, 1, 2 (score ties go by query), not the three largest logits.
  const numQueries = 40;
  const logits = Array.from({ length: numQueries }, (_, q) => [30 + (q % 5) + q / 100, -9]);
  const boxes = Array.from({ length: numQueries }, () => [0.5, 0.5, 0.1, 0.1]);
  const top = postprocess(raw(logits, boxes), { ...opts, maxDetections: 3 });
  assert.deepEqual(top.map((d) => [d.query, d.score]), [[0, 1], [1, 1], [2, 1]]);
  // Scores that differ: the cap keeps the best, as the uncapped order says.
  const graded = Array.from({ length: numQueries }, (_, q) => [((q * 17) % 40) / 8 - 1, -9]);
  const all = postprocess(raw(graded, boxes), { ...opts, threshold: 0.3, maxDetections: 300 });
  for (const k of [0, 1, 5, 17]) assert.deepEqual(postprocess(raw(graded, boxes), { ...opts, threshold: 0.3, maxDetections: k }), all.slice(0, k), `maxDetections ${k}`);
});
