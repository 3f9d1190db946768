// A segment model's selected rows on the client side (PROTOCOL.md, "Selected rows"): the reply's rows checked
// against the hello, the request's select built (and checked) only for a sidecar with a selected output, and
// the real test sidecar (test-echo declaring `segment`) answering a select end to end.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../../src/config/paths.ts';
import { f32Bytes, type WireOkReply } from '../../src/protocol/codec.ts';
import { inferResultOf } from '../../src/sidecar/infer-reply.ts';
import { selectFields } from '../../src/sidecar/infer-request.ts';
import { createBackend } from '../../src/sidecar/index.ts';
import { RfdetrError } from '../../src/errors.ts';
import { detectDecoded, type DetectParams } from '../../src/detect/pipeline.ts';
import type { RgbImage } from '../../src/image/decode.ts';
import { testSidecarInfo } from '../helpers/sidecar-info.ts';
import { rampPixels } from './pixels.ts';

// 3 queries, 2 classes, input 8 → M = 2: a mask row is 4 floats.
const seg = testSidecarInfo({
  protocolVersion: 4, sidecarVersion: 't', engine: 't', device: 't', inputShape: [3, 8, 8], numQueries: 3, numClasses: 2, labels: ['a', 'b'], variant: 'seg-nano', task: 'segment',
});
const det = testSidecarInfo({ protocolVersion: 4, sidecarVersion: 't', engine: 't', device: 't', inputShape: [3, 8, 8], numQueries: 3, numClasses: 2, labels: ['a', 'b'], variant: 'nano' });
const timing = { writtenAt: 10, readAt: 20, rtt: 10, encoded: false };
const logits = f32Bytes(new Float32Array(6));
const boxes = f32Bytes(new Float32Array(12));
const masks = (rows: number) => f32Bytes(Float32Array.from({ length: rows * 4 }, (_, i) => i));
const reply = (over: Partial<WireOkReply>): WireOkReply => ({ kind: 'reply', id: 1, ok: true, preprocess_ms: 1, forward_ms: 2, ...over });

test('the segment hello declares pred_masks [Q, S/4, S/4] rows selected; a reply\'s rows become Uint32Arrays beside the outputs', () => {
  assert.deepEqual(seg.outputs[2], { name: 'pred_masks', dtype: 'f32', shape: [3, 2, 2], rows: 'selected' });
  const r = inferResultOf(reply({ outputs: { logits, pred_boxes: boxes, pred_masks: masks(2) }, rows: { pred_masks: [2, 0] } }), seg, timing);
  assert.ok(typeof r !== 'string', String(r));
  assert.deepEqual(Array.from(r.rows!.pred_masks!), [2, 0]);
  assert.ok(r.rows!.pred_masks instanceof Uint32Array);
  assert.deepEqual(Array.from(r.outputs.pred_masks!), [0, 1, 2, 3, 4, 5, 6, 7]);
  const none = inferResultOf(reply({ outputs: { logits, pred_boxes: boxes, pred_masks: masks(0) }, rows: { pred_masks: [] } }), seg, timing);
  assert.ok(typeof none !== 'string', String(none));
  assert.equal(none.rows!.pred_masks!.length, 0);
  const plain = inferResultOf(reply({ outputs: { logits, pred_boxes: boxes } }), det, timing);
  assert.ok(typeof plain !== 'string' && plain.rows === undefined, 'a model without a selected output has no rows');
});

test('a reply whose rows break the hello is named: missing, too many, out of range, repeated, of the wrong size, or stray', () => {
  const out = (k: number) => ({ logits, pred_boxes: boxes, pred_masks: masks(k) });
  const cases: Array<[WireOkReply, typeof seg, RegExp]> = [
    [reply({ outputs: out(0) }), seg, /infer reply has no rows for the selected output pred_masks; the hello declared it rows: selected/],
    [reply({ outputs: out(4), rows: { pred_masks: [0, 1, 2, 0] } }), seg, /rows for pred_masks name 4 queries; the hello declared at most 3/],
    [reply({ outputs: out(1), rows: { pred_masks: [3] } }), seg, /rows for pred_masks name query 3; the hello declared 3 queries \(0\.\.2\)/],
    [reply({ outputs: out(2), rows: { pred_masks: [1, 1] } }), seg, /rows for pred_masks name query 1 twice/],
    [reply({ outputs: out(1), rows: { pred_masks: [0, 1] } }), seg, /output pred_masks is 16 bytes for 2 rows; the hello declared rows of f32 \[2,2\] = 32 bytes/],
    [reply({ outputs: out(1), rows: { pred_masks: [0], logits: [0] } }), seg, /has rows for logits, which the hello did not declare a selected output/],
    [reply({ outputs: { logits, pred_boxes: boxes }, rows: { pred_masks: [] } }), det, /has rows for pred_masks, which the hello did not declare a selected output/],
  ];
  for (const [r, info, want] of cases) {
    const got = inferResultOf(r, info, timing);
    assert.equal(typeof got, 'string', String(want));
    assert.match(got as string, want);
  }
});

test('select goes only to a sidecar with a selected output, keyed by class as decimal strings; bad values are E_USAGE', () => {
  const sel = { threshold: 0.5, max: 10, classes: [1], classThresholds: new Map([[1, 0.25], [0, 1]]) };
  assert.deepEqual(selectFields(sel, seg), { select: { threshold: 0.5, max: 10, classes: [1], class_thresholds: { 1: 0.25, 0: 1 } } });
  assert.deepEqual(selectFields({ threshold: 0, max: 0 }, seg), { select: { threshold: 0, max: 0 } });
  assert.deepEqual(selectFields(sel, det), {}, 'a detect sidecar gets no select (one from before select would refuse the key)');
  assert.deepEqual(selectFields(undefined, seg), {});
  for (const [bad, want] of [
    [{ threshold: 1.5, max: 1 }, /select\.threshold must be a number from 0 to 1, got 1\.5/],
    [{ threshold: Number.NaN, max: 1 }, /select\.threshold must be a number from 0 to 1, got NaN/],
    [{ threshold: 0.5, max: -1 }, /select\.max must be a whole number from 0/],
    [{ threshold: 0.5, max: 1.5 }, /select\.max must be a whole number from 0/],
    [{ threshold: 0.5, max: 1, classes: [2.5] }, /select\.classes must hold class indices .* got 2\.5/],
    [{ threshold: 0.5, max: 1, classThresholds: new Map([[1, 2]]) }, /select\.classThresholds of class 1 must be a number from 0 to 1, got 2/],
    [{ threshold: 0.5, max: 1, classThresholds: new Map([[-1, 0.5]]) }, /select\.classThresholds must be keyed by class indices .* got -1/],
  ] as const) {
    assert.throws(() => selectFields(bad, seg), (e: unknown) => e instanceof RfdetrError && e.code === 'E_USAGE' && want.test(e.message));
  }
});

test('real sidecar (test-echo as a segment model): the select picks the mask rows, the rows name their queries, no select no rows', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-seg-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const b = createBackend({
    engine: 'test-echo', weightsDir: dir, command: { file: path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar-test') },
    env: { RFDETR_TEST_ECHO_TASK: 'segment' }, startupTimeoutMs: 60_000,
  });
  t.after(() => b.destroy());
  await b.ready();
  assert.equal(b.info!.task, 'segment');
  assert.deepEqual(b.info!.outputs[2], { name: 'pred_masks', dtype: 'f32', shape: [300, 140, 140], rows: 'selected' });
  // logits = px + 1: -9 everywhere but query 5 class 3 (logit 3), query 7 class 1 (2), query 9 class 2 (1).
  const px = new Float32Array(rampPixels().length).fill(-10);
  px[5 * 91 + 3] = 2;
  px[7 * 91 + 1] = 1;
  px[9 * 91 + 2] = 0;
  const r = await b.infer({ pixelValues: px }, { select: { threshold: 0.8, max: 10 } });
  assert.deepEqual(Array.from(r.rows!.pred_masks!), [5, 7]);
  assert.equal(r.outputs.pred_masks!.length, 2 * 140 * 140);
  // test-echo's row of query q: element i = q + (i % 4) / 4.
  assert.deepEqual(Array.from(r.outputs.pred_masks!.subarray(0, 4)), [5, 5.25, 5.5, 5.75]);
  assert.deepEqual(Array.from(r.outputs.pred_masks!.subarray(140 * 140, 140 * 140 + 2)), [7, 7.25]);
  const byClass = await b.infer({ pixelValues: px }, { select: { threshold: 0.5, max: 10, classes: [2, 3], classThresholds: new Map([[3, 0.96]]) } });
  assert.deepEqual(Array.from(byClass.rows!.pred_masks!), [9]);
  const none = await b.infer({ pixelValues: px });
  assert.equal(none.rows!.pred_masks!.length, 0);
  assert.equal(none.outputs.pred_masks!.length, 0);
  await b.close();
});

/** The float32 `k` ulps from float32(x) (x > 0 or x < 0 alike: steps along the bit pattern away from or towards 0). */
function ulpsFrom(x: number, k: number): number {
  const f = new Float32Array([x]);
  new Int32Array(f.buffer)[0]! += k;
  return f[0]!;
}

test('real sidecar: the rows its rule selects hold every detection the client keeps (random near-ties, saturated and NaN logits)', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-seg-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const b = createBackend({
    engine: 'test-echo', weightsDir: dir, command: { file: path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar-test') },
    env: { RFDETR_TEST_ECHO_TASK: 'segment' }, startupTimeoutMs: 60_000,
  });
  t.after(() => b.destroy());
  await b.ready();
  const info = b.info!;
  const Q = info.numQueries;
  const C = info.numClasses;
  let seed = 12345;
  const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!;
  const image: RgbImage = { width: 64, height: 48, data: new Uint8Array(64 * 48 * 3) };
  let kept = 0;
  for (let trial = 0; trial < 300; trial++) {
    const threshold = pick([0.3, 0.5, 0.25, 0.7, 0.9]);
    const at = Math.log(threshold / (1 - threshold)); // the logit whose exact sigmoid is the threshold
    // logits = px + 1 (test-echo): -30 everywhere, then a few dozen queries near the threshold, tied, saturated or NaN.
    const px = new Float32Array(3 * 560 * 560).fill(-31);
    for (let n = 0; n < 40; n++) {
      const q = Math.floor(rand() * Q);
      const c = Math.floor(rand() * C);
      const kind = rand();
      // The f32 logits a few ulps around the threshold's: where the client's f32 sigmoid and f32(threshold) and
      // the exact values may disagree.
      const logit = kind < 0.2 ? ulpsFrom(at, Math.floor(rand() * 9) - 4) : kind < 0.4 ? at + (rand() - 0.5) * 4e-6 : kind < 0.6 ? pick([at + 0.5, at + 1, 2.25]) : kind < 0.8 ? 17 + rand() * 40 : kind < 0.9 ? Number.NaN : at + (rand() - 0.5) * 2;
      px[q * C + c] = logit - 1;
    }
    const classes = rand() < 0.3 ? new Set(Array.from({ length: 30 }, () => Math.floor(rand() * C))) : undefined;
    const classThresholds = rand() < 0.3 ? new Map([[Math.floor(rand() * C), pick([0.2, 0.6, 0.95])]]) : undefined;
    const params: DetectParams = { threshold, max_detections: Math.floor(rand() * 25), classes, classThresholds };
    // detectDecoded throws E_INTERNAL naming the query when a kept detection has no row.
    const r = await detectDecoded((_input, o) => b.infer({ pixelValues: px }, o), info, image, params, { t0: performance.now(), decodeMs: 0 });
    kept += r.detections.length;
    assert.ok(r.detections.every((d) => d.maskLogits?.length === 140 * 140 && d.maskLogits[0] === d.query), `trial ${trial}`);
  }
  assert.ok(kept > 300, `the trials kept detections to check (${kept})`);
  await b.close();
});
